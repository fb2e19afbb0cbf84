"""Database times as text for people: epoch milliseconds to ISO 8601 and back (`--after`).

Kept apart from the schedule file and the tables because both use it. Nothing here reads a
clock (rule zero): every millisecond value came from the database's `clock_timestamp()`, or
from the person at the keyboard (`--after`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

from ql3_runtime_core import load_timezone

from ql3_cluster_control._config import ConfigurationError

if TYPE_CHECKING:
    from ql3_runtime_core import ZoneRules

__all__ = ["format_ms", "parse_after"]

# `parse_after` subtracts this epoch instead of calling `datetime.timestamp()`: timedelta floor
# division gives exact integer milliseconds, with no float rounding.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_ms(ms: int | None, tz: str = "UTC", rules: ZoneRules | None = None) -> str:
    """Epoch milliseconds (a database time) as ISO 8601 in `tz`; '-' for None.

    `rules` are the zone rules to show local time by (the recorded ones where a database gave
    them); without, the pinned tzdata wheel's, like the engine's (never /usr/share).
    """
    if ms is None:
        return "-"
    if rules is not None:
        zone: tzinfo = rules.timezone(tz)
    else:
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
        # A wall time in a DST fold takes its first instance (fold=0), as the engine fires it.
        parsed = parsed.replace(tzinfo=load_timezone(tz))
    return (parsed - _EPOCH) // timedelta(milliseconds=1)
