"""The tables of a schedule file (`ql3 schedule apply FILE`): `schedule`, `trigger`, `backfill`.

One reader for both, so a file is parsed one way and an unknown top-level key is refused by
name whichever table a person meant. `_schedule_file` reads the schedules, `_trigger_file` the
manual Runs the file requests, `_backfill_file` its backfills.
"""

from __future__ import annotations

import json
import tomllib
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._config import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _Request(Protocol):
    @property
    def request_id(self) -> str: ...


_R = TypeVar("_R", bound=_Request)

__all__ = ["FILE_TABLES", "read_file_tables", "read_requests", "request_table"]

FILE_TABLES = ("schedule", "trigger", "backfill")


def read_file_tables(path: Path) -> dict[str, list[Any]]:
    """Read a schedule file's tables: `schedule` entries, `trigger` and `backfill` requests.

    TOML holds `[[schedule]]`, `[[trigger]]` and `[[backfill]]` tables. JSON is a list of
    schedule objects, or an object with the lists `schedule`, `trigger` and `backfill`.

    Raises:
        ConfigurationError: unreadable file, bad syntax, unknown top-level key.

    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read: {exc.strerror}") from exc
    document: Any
    # The suffix decides: `.json` is JSON, anything else is read as TOML.
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{path}: invalid JSON: {exc}") from exc
        if isinstance(document, list):
            document = {"schedule": document}
        if not isinstance(document, dict) or not set(document) <= set(FILE_TABLES):
            raise ConfigurationError(
                f"{path}: a JSON schedule file is a list of objects, or an object with the"
                " lists 'schedule', 'trigger' and 'backfill'"
            )
    else:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{path}: invalid TOML: {exc}") from exc
    extra = sorted(set(document) - set(FILE_TABLES))
    if extra:
        raise ConfigurationError(
            f"{path}: unknown top-level key {extra[0]!r}; use [[schedule]], [[trigger]] or"
            " [[backfill]]"
        )
    tables: dict[str, list[Any]] = {}
    for table in FILE_TABLES:
        entries = document.get(table, [])
        if not isinstance(entries, list):
            raise ConfigurationError(f"{path}: {table!r} must be a list of tables")
        tables[table] = entries
    return tables


def request_table(where: str, entry: object, keys: tuple[str, ...], what: str) -> dict[str, Any]:
    """Check one `[[trigger]]` or `[[backfill]]` table's keys; return it as a dict.

    Both name a `schedule` and a `request_id`, both required: a file is applied again and
    again, and only a fixed request id keeps its request one Run (or one backfill).

    Raises:
        ConfigurationError: not a table, an unknown key, `schedule` or `request_id` missing.

    """
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: must be a table with {', '.join(keys)}")
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {unknown[0]!r}; a {what} has {', '.join(keys)}"
        )
    for key in ("schedule", "request_id"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            reason = (
                f" (a file is applied again: only a fixed id keeps it one {what})"
                if key == "request_id"
                else ""
            )
            raise ConfigurationError(f"{where}: {key!r} is required and must be a string{reason}")
    return entry


def read_requests(path: Path, table: str, parse: Callable[[str, object], _R]) -> list[_R]:
    """Parse each `[[table]]` entry of the file with `parse(where, entry)`; ids once each.

    Raises:
        ConfigurationError: what `parse` refuses, or a request id used twice in the file.

    """
    requests = [
        parse(f"{path}: {table} #{index + 1}", entry)
        for index, entry in enumerate(read_file_tables(path)[table])
    ]
    seen: set[str] = set()
    for request in requests:
        if request.request_id in seen:
            raise ConfigurationError(f"{path}: request_id {request.request_id!r} appears twice")
        seen.add(request.request_id)
    return requests
