"""When a schedule may run: a window's ends and a one-off's wall time, read from people's text.

Used by the schedule file and `ql3 schedule add` alike (`_schedule_file`), so a flag and a key
are refused with the same words. Nothing here reads a clock (rule zero): every instant is one a
person wrote, or the one QL3's own cron engine gives for a wall time. Whether an instant is
already past is the database's to say, when the schedule is written.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

from ql3_runtime_core import EPOCH_MS_MAX, EPOCH_MS_MIN, QL3Error, next_occurrence_ms

from ._config import ConfigurationError

if TYPE_CHECKING:
    from ql3_runtime_core import ZoneRules

__all__ = ["OneOff", "one_off", "parse_instant", "parse_wall_time", "schedule_window"]

# Subtracted instead of calling `datetime.timestamp()`: timedelta floor division gives exact
# integer milliseconds, with no float rounding.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
# How far from a wall time (read as if it were UTC) its instant can lie: every UTC offset is
# within a day and a DST gap moves a wall time by hours, so three days hold every instant the
# engine can give for that date, and no occurrence of the year before or after.
_AROUND_MS = 3 * 86_400_000
_INSTANT_EXAMPLE = "2027-01-01T09:00:00+01:00 or 2027-01-01T08:00:00Z"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


_EPOCH_RANGE = f"{_iso(EPOCH_MS_MIN)}..{_iso(EPOCH_MS_MAX // 1000 * 1000)}"


def _parsed(text: object, field: str, example: str) -> datetime:
    """Read ISO 8601 text, or raise an error naming `field`, the value and a valid example."""
    if not isinstance(text, str):
        raise ConfigurationError(f"{field}: {text!r} is not a string (e.g. {example})")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(
            f"{field}: {text!r} is not an ISO 8601 date-time (e.g. {example})"
        ) from None
    if "T" not in text.upper() and " " not in text.strip():
        # fromisoformat reads a bare date as its midnight: too easy a mistake to run silently.
        raise ConfigurationError(f"{field}: {text!r} is a date without a time (e.g. {example})")
    return parsed


def parse_instant(text: object, field: str) -> int:
    """Parse one end of a window (`--start-at`, `end_at`...) to epoch ms; an offset is required.

    A window bounds absolute time, so a wall time without an offset is refused rather than read
    in some zone: which zone would be a guess, and a guess an hour off moves the window
    silently. `field` is the flag or key as the person wrote it, named in every error.

    Raises:
        ConfigurationError: not ISO 8601, without an offset, or outside the epoch range the cron
            engine computes in.

    """
    parsed = _parsed(text, field, _INSTANT_EXAMPLE)
    if parsed.utcoffset() is None:
        raise ConfigurationError(
            f"{field}: {text!r} has no UTC offset; a window bounds absolute time, so write one"
            f" (e.g. {_INSTANT_EXAMPLE})"
        )
    ms = (parsed - _EPOCH) // _MS
    if not EPOCH_MS_MIN <= ms <= EPOCH_MS_MAX:
        raise ConfigurationError(f"{field}: {text!r} is outside {_EPOCH_RANGE}")
    return ms


def schedule_window(
    start_at: object,
    end_at: object,
    *,
    start_field: str = "start_at",
    end_field: str = "end_at",
) -> tuple[int | None, int | None]:
    """Parse a window's ends (either may be None) to epoch ms; both ends are inclusive.

    Raises:
        ConfigurationError: an end `parse_instant` refuses, or an end before the start; each
            error names the flag or key as written (`--end-at`, `end_at`) and its value.

    """
    start = None if start_at is None else parse_instant(start_at, start_field)
    end = None if end_at is None else parse_instant(end_at, end_field)
    if start is not None and end is not None and end < start:
        raise ConfigurationError(
            f"{end_field}: {end_at!r} is earlier than {start_field} {start_at!r}; the window"
            " would admit nothing"
        )
    return start, end


def parse_wall_time(text: object, field: str) -> datetime:
    """Parse a one-off's `at`: a local wall time to the second, without an offset.

    The zone is given apart (`tz`) and the instant is left to the cron engine, so a wall time in
    a DST gap or fold is resolved by the same rules as a cron expression's (DESIGN §4). An
    offset is refused: in a fold it could name the second instance, which the engine never
    fires, and elsewhere it only repeats (or contradicts) the zone.

    Raises:
        ConfigurationError: not ISO 8601, with an offset, or with a fraction of a second.

    """
    parsed = _parsed(text, field, "2027-01-01T09:00:00")
    if parsed.tzinfo is not None:
        raise ConfigurationError(
            f"{field}: {text!r} carries a UTC offset; give the wall time without one"
            " (e.g. 2027-01-01T09:00:00) and its zone with tz"
        )
    if parsed.microsecond:
        raise ConfigurationError(
            f"{field}: {text!r} has a fraction of a second; a one-off runs at a whole second"
        )
    return parsed


class OneOff(NamedTuple):
    """A one-off as the engine decides it: the cron expression and the one instant it admits."""

    cron: str
    instant_ms: int


def one_off(at: object, timezone: str, rules: ZoneRules | None = None, field: str = "at") -> OneOff:
    """Return the cron expression matching the wall time `at` yearly, and its instant that year.

    The instant is the first occurrence of that expression the cron engine gives near that date
    with `rules` (the database's recorded zone rules; default this node's wheel): in a DST gap
    the first valid instant after the gap, in a fold the first instance (DESIGN §4). With the
    window start_at = end_at = that instant the schedule admits exactly that occurrence; the
    next one, a year later, lies past the end. `timezone` must already be a valid zone name.

    Raises:
        ConfigurationError: `at` is refused by `parse_wall_time`, or the engine gives that wall
            time no instant on that date (or one outside the range it computes in).

    """
    wall = parse_wall_time(at, field)
    cron = f"{wall.second} {wall.minute} {wall.hour} {wall.day} {wall.month} *"
    as_if_utc = (wall.replace(tzinfo=UTC) - _EPOCH) // _MS
    try:
        instant = next_occurrence_ms(cron, timezone, as_if_utc - _AROUND_MS, rules=rules)
        # The decision asks for the occurrence after the one it admits (a year later, past the
        # window's end): it must exist too, or the replica deciding it would fail there.
        next_occurrence_ms(cron, timezone, instant, rules=rules)
    except (QL3Error, ValueError, OverflowError):
        raise ConfigurationError(
            f"{field}: {at!r} in {timezone} is outside {_EPOCH_RANGE} (the range the cron"
            " engine computes in, with a year to spare)"
        ) from None
    if abs(instant - as_if_utc) > _AROUND_MS:
        raise ConfigurationError(
            f"{field}: {at!r} in {timezone}: the cron engine gives this wall time no instant on"
            " that date, so it would never run"
        )
    if not EPOCH_MS_MIN <= instant <= EPOCH_MS_MAX:
        raise ConfigurationError(f"{field}: {at!r} in {timezone} is outside {_EPOCH_RANGE}")
    return OneOff(cron, instant)
