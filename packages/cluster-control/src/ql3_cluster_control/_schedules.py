"""Schedules as code (`ql3 schedule apply FILE`) and time rendering for the CLI.

A schedule file is TOML (`[[schedule]]` tables) or JSON (a list of objects) with the keys
`name`, `cron`, `tz`, `misfire`, `grace_ms`. Rendering turns database epoch milliseconds into
ISO 8601 in a given zone; nothing here reads a clock (rule zero).
"""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from ql3_cluster_postgres import ScheduleSpec
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, load_timezone

from ._config import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "SCHEDULE_KEYS",
    "format_ms",
    "load_schedule_file",
    "parse_after",
    "schedule_definition",
]

SCHEDULE_KEYS = ("name", "cron", "tz", "misfire", "grace_ms")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def schedule_definition(
    cron: str, tz: str = "UTC", misfire: str = "fire_once", grace_ms: int = 60_000
) -> ScheduleDefinition:
    """Build and validate a definition; errors name the bad cron, zone or policy."""
    try:
        policy = MisfirePolicy(misfire)
    except ValueError:
        choices = ", ".join(member.value for member in MisfirePolicy)
        raise ConfigurationError(f"misfire: {misfire!r} is not one of {choices}") from None
    return ScheduleDefinition(
        cron=cron, timezone=tz, misfire_policy=policy, misfire_grace_ms=grace_ms
    )


def _spec(index: int, entry: object) -> ScheduleSpec:
    where = f"schedule #{index + 1}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: expected a table/object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(SCHEDULE_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(SCHEDULE_KEYS)})"
        )
    for key in ("name", "cron"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ConfigurationError(f"{where}: {key!r} is required and must be a string")
    where = f"schedule {entry['name']!r}"
    grace = entry.get("grace_ms", 60_000)
    if not isinstance(grace, int) or isinstance(grace, bool):
        raise ConfigurationError(f"{where}: grace_ms={grace!r} is not an integer")
    try:
        definition = schedule_definition(
            entry["cron"],
            str(entry.get("tz", "UTC")),
            str(entry.get("misfire", "fire_once")),
            grace,
        )
        # The name rules (printable, no padding, 1..200) live in the model, as for the API.
        return ScheduleSpec(name=entry["name"], definition=definition)
    except (ValidationError, ValueError) as exc:
        raise ConfigurationError(f"{where}: {_first_error(exc)}") from exc


# Model field -> the key a schedule file spells, so an error names what the file says.
_FILE_KEYS = {"misfire_grace_ms": "grace_ms", "timezone": "tz", "misfire_policy": "misfire"}


def _first_error(exc: Exception) -> str:
    if not isinstance(exc, ValidationError):
        return str(exc)
    error = exc.errors()[0]
    field = str(error["loc"][-1]) if error["loc"] else ""
    detail = error["msg"].removeprefix("Value error, ")
    if not field:
        return detail
    detail = detail.removeprefix(f"{field}:").lstrip()
    return f"{_FILE_KEYS.get(field, field)}: {detail}"


def load_schedule_file(path: Path) -> list[ScheduleSpec]:
    """Read a TOML or JSON schedule file into specs.

    Raises:
        ConfigurationError: unreadable file, bad syntax, unknown key, duplicate name, bad value.

    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read: {exc.strerror}") from exc
    entries: Any
    if path.suffix.lower() == ".json":
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{path}: invalid JSON: {exc}") from exc
        if not isinstance(entries, list):
            raise ConfigurationError(f"{path}: a JSON schedule file is a list of objects")
    else:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{path}: invalid TOML: {exc}") from exc
        extra = sorted(set(document) - {"schedule"})
        if extra:
            raise ConfigurationError(
                f"{path}: unknown top-level key {extra[0]!r}; use [[schedule]]"
            )
        entries = document.get("schedule", [])
    specs = [_spec(index, entry) for index, entry in enumerate(entries)]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigurationError(f"{path}: schedule {spec.name!r} appears twice")
        seen.add(spec.name)
    return specs


def format_ms(ms: int | None, tz: str = "UTC") -> str:
    """Epoch milliseconds (a database time) as ISO 8601 in `tz`; '-' for None."""
    if ms is None:
        return "-"
    zone = UTC if tz == "UTC" else load_timezone(tz)
    return datetime.fromtimestamp(ms / 1000, tz=zone).isoformat(timespec="milliseconds")


def parse_after(text: str, tz: str) -> int:
    """Parse `--after` (ISO 8601) to epoch ms; a time without offset is read in `tz`.

    Raises:
        ConfigurationError: not ISO 8601.

    """
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(
            f"--after: {text!r} is not an ISO 8601 date-time (e.g. 2026-03-08T01:00:00-05:00)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=load_timezone(tz))
    return (parsed - _EPOCH) // timedelta(milliseconds=1)
