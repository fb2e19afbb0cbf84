"""A brute-force cron reference for the property tests: it walks absolute time, one step at a time.

It shares no code with the engine: its own field parser (the dialect of runtime-core's README,
assumed valid: refusals are tested elsewhere), its own Vixie day matching, and the DST rules of
DESIGN §4 applied instant by instant through `zoneinfo`:

- interval-like (seconds, minutes or hours field starts with `*`): every instant whose local wall
  time matches;
- fixed-time: a matching wall time at its first instance only (`fold == 0`), and for a wall time
  skipped by a gap, the transition instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = ["ReferenceCron", "wall_of"]

# (low, high) of each field, seconds first; day-of-week 7 is Sunday again.
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = {
    4: {
        name: number
        for number, name in enumerate(
            ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1
        )
    },
    5: {
        name: number
        for number, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])
    },
}
_NICKNAMES = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}


def _number(text: str, names: dict[str, int]) -> int:
    return names[text.upper()] if text.upper() in names else int(text)


def _parse_item(item: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    step, stepped = 1, "/" in item
    if stepped:
        item, step_text = item.split("/")
        step = int(step_text)
    if item in {"*", "?"}:
        first, last = low, high
    elif "-" in item:
        first_text, last_text = item.split("-")
        first, last = _number(first_text, names), _number(last_text, names)
    else:
        first = last = _number(item, names)
        if stepped:  # `a/n` runs to the end of the field
            last = high
    return set(range(first, last + 1, step))


def _parse_field(field: str, position: int) -> frozenset[int]:
    low, high = _BOUNDS[position]
    values: set[int] = set()
    for item in field.split(","):
        values |= _parse_item(item, low, high, _NAMES.get(position, {}))
    if position == 5:
        values = {value % 7 for value in values}
    return frozenset(values)


@dataclass(frozen=True)
class ReferenceCron:
    """A parsed expression (5 or 6 fields) with the matching rules spelled out plainly."""

    expression: str

    @property
    def parts(self) -> list[str]:
        """Return the fields as written (a nickname replaced by its 5 fields)."""
        text = " ".join(self.expression.split())
        return _NICKNAMES.get(text.upper(), text).split()

    @property
    def fields(self) -> list[str]:
        """Return the six fields, seconds first (`0` added for a 5-field expression)."""
        parts = self.parts
        return parts if len(parts) == 6 else ["0", *parts]

    @property
    def interval_like(self) -> bool:
        """Tell whether the seconds (if given), minutes or hours field starts with `*`."""
        parts = self.parts
        time_fields = parts[:3] if len(parts) == 6 else parts[:2]
        return any(field.startswith("*") for field in time_fields)

    @cached_property
    def _sets(self) -> list[frozenset[int]]:
        return [_parse_field(field, position) for position, field in enumerate(self.fields)]

    def matches(self, wall: datetime) -> bool:
        """Tell whether a local wall time matches, with Vixie's day-of-month/day-of-week rule."""
        seconds, minutes, hours = self._sets[:3]
        if wall.second not in seconds or wall.minute not in minutes or wall.hour not in hours:
            return False
        return self.day_matches(wall.date())

    def day_matches(self, day: date) -> bool:
        """Tell whether a calendar date matches the month, day-of-month and day-of-week fields."""
        _, _, _, days, months, weekdays = self._sets
        if day.month not in months:
            return False
        day_ok = day.day in days
        weekday_ok = (day.weekday() + 1) % 7 in weekdays
        dom_field, dow_field = self.fields[3], self.fields[5]
        if dom_field.startswith(("*", "?")) or dow_field.startswith(("*", "?")):
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def occurrences(self, zone: ZoneInfo, start_s: int, end_s: int) -> list[int]:
        """Return every occurrence in `[start_s, end_s]` (epoch seconds) by walking each step."""
        step = 1 if len(self.parts) == 6 else 60
        found: set[int] = set()
        instant = start_s - start_s % step
        while instant <= end_s:
            local = datetime.fromtimestamp(instant, zone)
            if instant >= start_s and self._fires_at(zone, instant, local, step):
                found.add(instant)
            instant += step
        return sorted(found)

    def _fires_at(self, zone: ZoneInfo, instant: int, local: datetime, step: int) -> bool:
        wall = local.replace(tzinfo=None)
        if self.matches(wall) and (self.interval_like or local.fold == 0):
            return True
        if self.interval_like:
            return False
        return any(self.matches(gap_wall) for gap_wall in _gap_walls(zone, instant, step))


def _gap_walls(zone: ZoneInfo, instant: int, step: int) -> list[datetime]:
    """Return the wall times skipped by a forward transition happening exactly at `instant`."""
    before = datetime.fromtimestamp(instant - 1, zone).utcoffset()
    after = datetime.fromtimestamp(instant, zone).utcoffset()
    if before is None or after is None or after <= before:
        return []
    gap_start = wall_of(zone, instant) - (after - before)
    count = int((after - before).total_seconds()) // step
    return [gap_start + timedelta(seconds=step * k) for k in range(count)]


def wall_of(zone: ZoneInfo, instant: int) -> datetime:
    """Return the naive local wall time of an epoch-seconds instant."""
    return datetime.fromtimestamp(instant, zone).replace(tzinfo=None)
