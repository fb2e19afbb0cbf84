"""Schedules as code (`ql3 schedule apply FILE`) and the flags of `ql3 schedule add`.

A schedule file is TOML (`[[schedule]]` tables) or JSON (a list of objects) with the keys
`name`, `cron`, `tz`, `misfire`, `grace_ms`, a window `start_at` / `end_at` (ISO 8601 with an
offset: nothing is due before the start or after the end), or instead of `cron` and the window a
one-off `at` (a wall time in `tz`, see `one_off_definition`), and what its runs execute
(DESIGN §10): `command` (run with /bin/sh -c; without it the schedule is a Python task run by
name), `max_attempts`, `timeout_s`, `retry_backoff_ms`, the overlap policy `overlap` (allow,
skip, replace) with its cap `max_running` (read by `_schedule_overlap`); and
`pause_after_failures`, `paused` (true, or `{reason, until}`: see `_pause_keys`), `alert_on`,
`alert_command`, `alert_webhook`, `alert_deadline` (see `_alert_keys`).
`schedule_definition`,
`one_off_definition` and `task_execution` build the same models from `ql3 schedule add`'s flags,
so a file and a command line are checked by one code path and their errors name the key a person
wrote (`grace_ms`, `timeout_s`); the window and the one-off are read by `_schedule_window`.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from ql3_cluster_postgres import ScheduleSpec
from ql3_runtime_core import (
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    RETRY_BACKOFF_MS_DEFAULT,
    RETRY_BACKOFF_MS_MAX,
    TIMEOUT_MS_DEFAULT,
    TIMEOUT_MS_MAX,
    TIMEOUT_MS_MIN,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
)

from ._alert_keys import ALERT_KEYS, entry_alerts
from ._config import ConfigurationError
from ._file_tables import read_file_tables
from ._pause_keys import entry_pause
from ._schedule_overlap import OVERLAP_KEYS, with_overlap
from ._schedule_window import one_off, schedule_window

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from ql3_runtime_core import ZoneRules

__all__ = [
    "SCHEDULE_KEYS",
    "TIMEOUT_S_DEFAULT",
    "TIMEOUT_S_MAX",
    "TIMEOUT_S_MIN",
    "load_schedule_file",
    "one_off_definition",
    "schedule_definition",
    "task_execution",
]

SCHEDULE_KEYS = (
    "name",
    "cron",
    "tz",
    "misfire",
    "grace_ms",
    "start_at",
    "end_at",
    "at",
    "command",
    "max_attempts",
    "timeout_s",
    "retry_backoff_ms",
    "pause_after_failures",
    "paused",
    *OVERLAP_KEYS,
    *ALERT_KEYS,
)
# People give a timeout in seconds; the task stores milliseconds (TaskExecution's bounds).
TIMEOUT_S_MIN = TIMEOUT_MS_MIN // 1000
TIMEOUT_S_MAX = TIMEOUT_MS_MAX // 1000
TIMEOUT_S_DEFAULT = TIMEOUT_MS_DEFAULT // 1000
# Each execution key, its bounds and default: checked here so the message names the key.
_EXECUTION_BOUNDS = {
    "max_attempts": (1, MAX_ATTEMPTS_MAX, MAX_ATTEMPTS_DEFAULT),
    "timeout_s": (TIMEOUT_S_MIN, TIMEOUT_S_MAX, TIMEOUT_S_DEFAULT),
    "retry_backoff_ms": (0, RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_DEFAULT),
}


def schedule_definition(  # noqa: PLR0917  # one argument per flag of `schedule add`
    cron: str,
    tz: str = "UTC",
    misfire: str = "fire_once",
    grace_ms: int = 60_000,
    start_at_ms: int | None = None,
    end_at_ms: int | None = None,
) -> ScheduleDefinition:
    """Build and validate a definition; errors name the bad cron, zone, policy or window."""
    try:
        policy = MisfirePolicy(misfire)
    except ValueError:
        choices = ", ".join(member.value for member in MisfirePolicy)
        raise ConfigurationError(f"misfire: {misfire!r} is not one of {choices}") from None
    return ScheduleDefinition(
        cron=cron,
        timezone=tz,
        misfire_policy=policy,
        misfire_grace_ms=grace_ms,
        start_at_ms=start_at_ms,
        end_at_ms=end_at_ms,
    )


def one_off_definition(
    at: object,
    tz: str = "UTC",
    misfire: str = "fire_once",
    grace_ms: int = 60_000,
    *,
    rules: ZoneRules | None = None,
    field: str = "at",
) -> ScheduleDefinition:
    """Build the definition of a one-off run at the wall time `at` in `tz` (see `one_off`).

    A cron expression matching that wall time yearly, with start_at = end_at = the instant the
    cron engine gives for it with `rules`: the decision admits that occurrence once, under the
    misfire policy like any other, and the schedule becomes `exhausted` after it.
    """
    # Zone, policy and grace are checked first, so their errors name them and not `at`.
    schedule_definition("* * * * *", tz, misfire, grace_ms)
    cron, instant = one_off(at, tz, rules, field)
    return schedule_definition(cron, tz, misfire, grace_ms, instant, instant)


def task_execution(
    command: str | None = None,
    max_attempts: int = MAX_ATTEMPTS_DEFAULT,
    timeout_s: int = TIMEOUT_S_DEFAULT,
    retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
) -> TaskExecution:
    """Build what a schedule's runs execute; errors name the key (`timeout_s`, not `_ms`).

    Raises:
        ConfigurationError: a value outside its bounds, or a command a shell cannot run as
            written (empty, blank, too long, holding NUL).

    """
    given = {
        "max_attempts": max_attempts,
        "timeout_s": timeout_s,
        "retry_backoff_ms": retry_backoff_ms,
    }
    for key, value in given.items():
        low, high, _ = _EXECUTION_BOUNDS[key]
        # bool is an int in Python, but `max_attempts = true` in a file is a mistake, not a 1.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{key}: {value!r} is not an integer")
        if not low <= value <= high:
            raise ConfigurationError(f"{key}: must be within {low}..{high}, got {value}")
    if command is not None and not isinstance(command, str):
        raise ConfigurationError(f"command: {command!r} is not a string")
    try:
        return TaskExecution(
            command=command,
            max_attempts=max_attempts,
            timeout_ms=timeout_s * 1000,
            retry_backoff_ms=retry_backoff_ms,
        )
    except ValidationError as exc:
        raise ConfigurationError(_first_error(exc)) from exc


def _entry_execution(entry: dict[str, Any]) -> TaskExecution:
    """Read the execution keys of one schedule file entry (defaults for those left out)."""
    values = {key: entry.get(key, default) for key, (_, _, default) in _EXECUTION_BOUNDS.items()}
    execution = task_execution(entry.get("command"), **values)
    return with_overlap(execution, entry.get("overlap", "allow"), entry.get("max_running"))


_WINDOW_KEYS = ("start_at", "end_at")


def _time_text(value: object) -> object:
    """Turn a TOML date or date-time (an unquoted value) back into its ISO text, as JSON has it."""
    return value.isoformat() if isinstance(value, date) else value


def _entry_definition(
    entry: dict[str, Any], grace: int, rules: ZoneRules | None
) -> ScheduleDefinition:
    """Read the timing keys of one entry: `cron` with an optional window, or a one-off `at`."""
    tz = str(entry.get("tz", "UTC"))
    misfire = str(entry.get("misfire", "fire_once"))
    if "at" in entry:
        return one_off_definition(_time_text(entry["at"]), tz, misfire, grace, rules=rules)
    start, end = schedule_window(*(_time_text(entry.get(key)) for key in _WINDOW_KEYS))
    return schedule_definition(entry["cron"], tz, misfire, grace, start, end)


def _spec(index: int, entry: object, rules: ZoneRules | None = None) -> ScheduleSpec:
    where = f"schedule #{index + 1}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: expected a table/object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(SCHEDULE_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(SCHEDULE_KEYS)})"
        )
    one_off_entry = "at" in entry
    for key in ("name",) if one_off_entry else ("name", "cron"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ConfigurationError(f"{where}: {key!r} is required and must be a string")
    # From here on errors name the schedule, which people find faster than its position.
    where = f"schedule {entry['name']!r}"
    clash = [key for key in ("cron", *_WINDOW_KEYS) if key in entry]
    if one_off_entry and clash:
        raise ConfigurationError(
            f"{where}: 'at' excludes {clash[0]!r}: a one-off is its own cron expression and window"
        )
    grace = entry.get("grace_ms", 60_000)
    if not isinstance(grace, int) or isinstance(grace, bool):
        raise ConfigurationError(f"{where}: grace_ms={grace!r} is not an integer")
    try:
        definition = _entry_definition(entry, grace, rules)
        execution = _entry_execution(entry)
        pause = entry_pause(entry, where)
        # The name rules (printable, no padding, 1..200) live in the model, as for the API.
        alerts = entry_alerts(entry)
        return ScheduleSpec(
            name=entry["name"], definition=definition, execution=execution, alerts=alerts, **pause
        )
    except (ValidationError, ValueError) as exc:
        raise ConfigurationError(f"{where}: {_first_error(exc)}") from exc


# Model field -> the key a schedule file spells, so an error names what the file says.
_FILE_KEYS = {
    "misfire_grace_ms": "grace_ms",
    "timezone": "tz",
    "misfire_policy": "misfire",
    "start_at_ms": "start_at",
    "end_at_ms": "end_at",
}


def _first_error(exc: Exception) -> str:
    if not isinstance(exc, ValidationError):
        return str(exc)
    # One error is enough to fix a file entry; the innermost location names the key.
    error = exc.errors()[0]
    field = str(error["loc"][-1]) if error["loc"] else ""
    detail = error["msg"].removeprefix("Value error, ")
    if not field:
        return detail
    detail = detail.removeprefix(f"{field}:").lstrip()
    return f"{_FILE_KEYS.get(field, field)}: {detail}"


def load_schedule_file(
    path: Path, zone_rules: Callable[[Sequence[str]], ZoneRules] | None = None
) -> list[ScheduleSpec]:
    """Read a TOML or JSON schedule file into specs.

    A one-off's instant (`at`) is computed with the zone rules `zone_rules` returns for the
    zones the one-offs name (the database's recorded ones, so the instant is the one the
    replicas decide by); without it, with this node's tzdata wheel. The file is checked whole
    with the wheel's rules first, so a bad entry is refused before `zone_rules` is asked (and
    before any connection is made).

    Raises:
        ConfigurationError: unreadable file, bad syntax, unknown key, duplicate name, bad value.

    """
    entries = read_file_tables(path)["schedule"]
    specs = [_spec(index, entry) for index, entry in enumerate(entries)]
    zones = sorted({str(e.get("tz", "UTC")) for e in entries if "at" in e})
    if zones and zone_rules is not None:
        rules = zone_rules(zones)
        specs = [_spec(index, entry, rules) for index, entry in enumerate(entries)]
    # Refused here, before any database work: applying would otherwise keep whichever came last.
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigurationError(f"{path}: schedule {spec.name!r} appears twice")
        seen.add(spec.name)
    return specs
