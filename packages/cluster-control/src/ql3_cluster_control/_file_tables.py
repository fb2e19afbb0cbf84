"""The tables of a schedule file (`ql3 schedule apply FILE`): `schedule` and `trigger`.

One reader for both, so a file is parsed one way and an unknown top-level key is refused by
name whichever table a person meant. `_schedule_file` reads the schedules, `_trigger_file` the
manual Runs the file requests.
"""

from __future__ import annotations

import json
import tomllib
from typing import TYPE_CHECKING, Any

from ._config import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["FILE_TABLES", "read_file_tables"]

FILE_TABLES = ("schedule", "trigger")


def read_file_tables(path: Path) -> dict[str, list[Any]]:
    """Read a schedule file's tables: `schedule` entries and `trigger` requests (maybe none).

    TOML holds `[[schedule]]` and `[[trigger]]` tables. JSON is a list of schedule objects, or
    an object with the lists `schedule` and `trigger`.

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
                " lists 'schedule' and 'trigger'"
            )
    else:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{path}: invalid TOML: {exc}") from exc
    extra = sorted(set(document) - set(FILE_TABLES))
    if extra:
        raise ConfigurationError(
            f"{path}: unknown top-level key {extra[0]!r}; use [[schedule]] or [[trigger]]"
        )
    tables: dict[str, list[Any]] = {}
    for table in FILE_TABLES:
        entries = document.get(table, [])
        if not isinstance(entries, list):
            raise ConfigurationError(f"{path}: {table!r} must be a list of tables")
        tables[table] = entries
    return tables
