"""Cron occurrence engine (SPEC §6): croniter for field matching, zoneinfo for the DST rules.

PLACEHOLDER: this first version delegates to croniter without the DST fold/gap rules; the
complete engine replaces it (issue 3).
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ._errors import InvalidCronError, UnknownTimezoneError

__all__ = ["load_timezone", "next_occurrence_ms", "preview_occurrences", "validate_cron_expression"]


def validate_cron_expression(expression: str) -> str:
    """Return the expression normalized (single spaces), or raise `InvalidCronError`."""
    normalized = " ".join(expression.split())
    fields = normalized.split(" ")
    if len(fields) not in (5, 6):
        raise InvalidCronError(expression, f"expected 5 or 6 fields, got {len(fields)}")
    if not croniter.is_valid(normalized, second_at_beginning=True):
        raise InvalidCronError(expression, "not a valid cron expression")
    return normalized


def load_timezone(name: str) -> ZoneInfo:
    """Return the IANA zone `name`, or raise `UnknownTimezoneError`."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimezoneError(name) from exc


def next_occurrence_ms(expression: str, timezone: str, after_ms: int) -> int:
    """Return the first occurrence strictly after `after_ms` (epoch ms)."""
    zone = load_timezone(timezone)
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(zone)
    itr = croniter(validate_cron_expression(expression), start, second_at_beginning=True)
    return int(itr.get_next(float) * 1000)


def preview_occurrences(expression: str, timezone: str, after_ms: int, count: int) -> list[int]:
    """Return the next `count` occurrences strictly after `after_ms`, as epoch ms."""
    result: list[int] = []
    current = after_ms
    for _ in range(count):
        current = next_occurrence_ms(expression, timezone, current)
        result.append(current)
    return result
