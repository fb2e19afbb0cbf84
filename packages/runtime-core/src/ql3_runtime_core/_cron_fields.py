"""QL3's cron dialect (DESIGN §4): an expression parsed into explicit value sets, or refused.

The dialect is the table in runtime-core's README and this module is its only implementation: no
third-party parser decides what a field means, because croniter 7 widened `9-9` to the whole field,
read `?` as `*` in both day fields and accepted `R` with a different value in every process. Every
accepted expression becomes the sorted values of each field plus Vixie's rule for the two day
fields; everything else raises `InvalidCronError` naming the field and the offending token.

`CronFields` also answers the calendar questions the occurrence walker asks (does a date match,
which is the next matching date, how many match in a range), from those sets alone.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import re
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Final

from ._errors import InvalidCronError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["CronFields", "normalize_expression", "parse_expression"]

NICKNAMES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# What the usual extensions mean, to say why they are refused: each would need identical
# semantics on every replica (R: a random value per process), and none is part of the dialect.
_EXTENSIONS: Final = {
    "R": "a random value, drawn differently by every process",
    "H": "a hashed value (Jenkins), not part of this dialect",
    "L": "'last' (Quartz), not part of this dialect",
    "W": "'nearest weekday' (Quartz), not part of this dialect",
    "LW": "'last weekday' (Quartz), not part of this dialect",
    "#": "'nth weekday' (Quartz), not part of this dialect",
    "?": "allowed only as a whole day-of-month or day-of-week field",
}
_TOKEN: Final = re.compile(r"[A-Za-z]+|[0-9]+|.")
_DAY_S: Final = 86_400
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()
_LONGEST_MONTH: Final = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# The weekday pattern of the Gregorian calendar repeats every 400 years: a day rule that matches
# nothing in that long matches nothing ever (validation refuses such expressions first).
_SEARCH_MONTHS: Final = 400 * 12 + 12


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for the value `name_base + i`
    name_base: int = 0

    def value(self, text: str, item: str) -> int:
        """Return the number or name `text` as an in-range value."""
        if text.isascii() and text.isdigit():
            # isascii first: str.isdigit also accepts digits of other scripts ('٣'), which int()
            # would read. A long digit string is out of range without converting it at all.
            number = int(text) if len(text) <= 4 else self.high + 1  # noqa: PLR2004
            if self.low <= number <= self.high:
                return number
            raise self.error(item, f"{text!r} is out of range {self.low}-{self.high}")
        if text.upper() in self.names:
            return self.names.index(text.upper()) + self.name_base
        raise self.error(item, f"{text!r} is not a value of this field")

    def error(self, item: str, reason: str) -> ValueError:
        """Return the message for a bad item; the caller wraps it with the expression."""
        return ValueError(f"{self.name} field {item!r}: {reason}")


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DAY_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS, name_base=1)
_DAY_OF_WEEK = _Field("day-of-week", 0, 7, _DAYS)  # 7 is Sunday again, as in Vixie cron


def normalize_expression(expression: str) -> str:
    """Collapse whitespace and replace a nickname (`@daily`) by its 5-field equivalent."""
    normalized = " ".join(expression.split())
    return NICKNAMES.get(normalized.lower(), normalized)


def parse_expression(normalized: str, expression: str) -> CronFields:
    """Parse a normalized expression; errors quote `expression`, as the user wrote it."""
    try:
        return _parse(normalized)
    except ValueError as exc:
        raise InvalidCronError(expression, str(exc)) from None


def _parse(normalized: str) -> CronFields:
    texts = normalized.split(" ") if normalized else []
    if normalized.startswith("@"):
        accepted = ", ".join(NICKNAMES)
        raise ValueError(f"nickname {normalized!r} is refused (accepted: {accepted})")
    if len(texts) not in (5, 6):
        raise ValueError(f"expected 5 or 6 fields, got {len(texts)}")
    if len(texts) == 5:  # noqa: PLR2004
        # A 5-field expression fires at second 0; parsing it as 6 fields keeps one code path.
        texts = ["0", *texts]
    second, minute, hour, dom, month, dow = texts
    days, dom_star = _day_field(dom, _DAY_OF_MONTH)
    weekdays, dow_star = _day_field(dow, _DAY_OF_WEEK)
    fields = CronFields(
        seconds=tuple(sorted(_parse_field(second, _SECOND))),
        minutes=tuple(sorted(_parse_field(minute, _MINUTE))),
        hours=tuple(sorted(_parse_field(hour, _HOUR))),
        days=frozenset(days),
        months=frozenset(_parse_field(month, _MONTH)),
        weekdays=frozenset(day % 7 for day in weekdays),  # 7 (Sunday) folds onto 0
        days_and=dom_star or dow_star,
        # Seconds, minutes, hours: a `*` in any of them follows absolute time (module docstring).
        interval_like=any(text.startswith("*") for text in texts[:3]),
    )
    fields.check_fires()
    return fields


def _day_field(text: str, spec: _Field) -> tuple[set[int], bool]:
    """Return a day field's values and Vixie's star flag (the field starts with `*` or is `?`)."""
    if text == "?":
        # `?` means "no restriction here", so it counts as a star for Vixie's AND/OR rule.
        return set(range(spec.low, spec.high + 1)), True
    return _parse_field(text, spec), text.startswith("*")


def _parse_field(text: str, spec: _Field) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise spec.error(text, "empty list item")
        _check_tokens(item, spec)
        values.update(_parse_item(item, spec))
    return values


def _check_tokens(item: str, spec: _Field) -> None:
    """Refuse any token outside the dialect by name, before the item's shape is checked."""
    for piece in _TOKEN.findall(item):
        upper = piece.upper()
        if (piece.isascii() and piece.isdigit()) or piece in {"*", "-", "/"} or upper in spec.names:
            continue
        if upper in _EXTENSIONS:
            raise spec.error(item, f"{piece!r} is refused: {_EXTENSIONS[upper]}")
        raise spec.error(item, f"{piece!r} is not a number or a name of this field")


def _parse_item(item: str, spec: _Field) -> range:
    body, slash, step_text = item.partition("/")
    step = 1
    if slash:
        longest = spec.high - spec.low
        digits = step_text.isascii() and step_text.isdigit() and len(step_text) <= 4  # noqa: PLR2004
        step = int(step_text) if digits else 0
        if not 1 <= step <= longest:
            raise spec.error(item, f"step {step_text!r} is not a number from 1 to {longest}")
    if body == "*":
        return range(spec.low, spec.high + 1, step)
    first_text, dash, last_text = body.partition("-")
    first = spec.value(first_text, item)
    if not dash:
        # `a/n` runs to the end of the field, as in Vixie cron's descendants (cronie).
        return range(first, (spec.high if slash else first) + 1, step)
    last = spec.value(last_text, item)
    if last < first:
        raise spec.error(item, "the range runs backwards (wrap-around ranges are refused)")
    return range(first, last + 1, step)


@dataclass(frozen=True)
class CronFields:
    """An expression's explicit value sets (seconds first; weekdays with Sunday = 0).

    `days_and` is Vixie's rule: when either day field starts with `*` (or is `?`), a date must
    match both day fields; otherwise (both restricted) either one.
    """

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_and: bool
    interval_like: bool
    _by_month: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def check_fires(self) -> None:
        """Refuse a day rule no date satisfies (`0 0 30 2 *`).

        Under OR any weekday matches some date of every month. Under AND a day-of-month that
        exists in a chosen month falls on every weekday in some year (Feb 29 within 28 years).
        """
        if self.days_and and not any(
            day <= _LONGEST_MONTH[month] for month in self.months for day in self.days
        ):
            raise ValueError(
                "the expression never fires: no day of the day-of-month field exists in a"
                " month of the month field"
            )

    @functools.cached_property
    def every_day(self) -> bool:
        """Tell whether every date matches."""
        all_days, all_weekdays = len(self.days) == 31, len(self.weekdays) == 7  # noqa: PLR2004
        if len(self.months) != 12:  # noqa: PLR2004
            return False
        return (all_days and all_weekdays) if self.days_and else (all_days or all_weekdays)

    def month_days(self, year: int, month: int) -> tuple[int, ...]:
        """Return the matching days of a month, ascending (remembered per month)."""
        found = self._by_month.get((year, month))
        if found is None:
            found = self._compute_month_days(year, month)
            if len(self._by_month) > 4_096:  # noqa: PLR2004
                # Bounded without LRU bookkeeping: a walk touches a few months at a time, and
                # dropping everything only costs recomputing those.
                self._by_month.clear()
            self._by_month[year, month] = found
        return found

    def _compute_month_days(self, year: int, month: int) -> tuple[int, ...]:
        if month not in self.months:
            return ()
        first_weekday, length = calendar.monthrange(year, month)  # Monday = 0
        result: list[int] = []
        for day in range(1, length + 1):
            weekday = (first_weekday + day) % 7  # Sunday = 0
            in_days, in_weekdays = day in self.days, weekday in self.weekdays
            if (in_days and in_weekdays) if self.days_and else (in_days or in_weekdays):
                result.append(day)
        return tuple(result)

    def day_matches(self, epoch_day: int) -> bool:
        """Tell whether a date (days since 1970-01-01) matches."""
        if self.every_day:
            return True
        moment = date.fromordinal(epoch_day + _EPOCH_ORDINAL)
        return moment.day in self.month_days(moment.year, moment.month)

    def next_day(self, epoch_day: int) -> int | None:
        """Return the first matching date at or after `epoch_day`, or None before year 10000."""
        if self.every_day:
            return epoch_day
        moment = date.fromordinal(epoch_day + _EPOCH_ORDINAL)
        year, month, first = moment.year, moment.month, moment.day
        for _ in range(_SEARCH_MONTHS):
            if year > 9999:  # noqa: PLR2004
                return None
            days = self.month_days(year, month)
            index = bisect.bisect_left(days, first)
            if index < len(days):
                return date(year, month, days[index]).toordinal() - _EPOCH_ORDINAL
            # The following month, from its first day (December rolls over into January).
            year, month, first = year + month // 12, month % 12 + 1, 1
        return None

    def count_days(self, first_day: int, last_day: int) -> int:
        """Return how many dates in `[first_day, last_day]` match, a month at a time."""
        if last_day < first_day:
            return 0
        if self.every_day:
            return last_day - first_day + 1
        first = date.fromordinal(first_day + _EPOCH_ORDINAL)
        last = date.fromordinal(last_day + _EPOCH_ORDINAL)
        total, year, month = 0, first.year, first.month
        while (year, month) <= (last.year, last.month):
            days = self.month_days(year, month)
            low = first.day if (year, month) == (first.year, first.month) else 1
            high = last.day if (year, month) == (last.year, last.month) else 31  # past any end
            total += bisect.bisect_right(days, high) - bisect.bisect_left(days, low)
            year, month = year + month // 12, month % 12 + 1
        return total

    def next_time(self, time_of_day: int) -> int | None:
        """Return the first matching time of day (seconds) at or after `time_of_day`, or None."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        hour, rest = divmod(time_of_day, 3600)
        minute, second = divmod(rest, 60)
        # Odometer order: the same hour and minute with a later second, else a later minute of
        # this hour from its first second, else a later hour from its first minute and second.
        h = bisect.bisect_left(hours, hour)
        if h < len(hours) and hours[h] == hour:
            m = bisect.bisect_left(minutes, minute)
            if m < len(minutes) and minutes[m] == minute:
                s = bisect.bisect_left(seconds, second)
                if s < len(seconds):
                    return hour * 3600 + minute * 60 + seconds[s]
                m += 1
            if m < len(minutes):
                return hour * 3600 + minutes[m] * 60 + seconds[0]
            h += 1
        return hours[h] * 3600 + minutes[0] * 60 + seconds[0] if h < len(hours) else None

    def times_between(self, first: int, last: int) -> Iterator[int]:
        """Yield the matching times of day (seconds) in `[first, last]`, ascending."""
        for hour in self.hours:
            at_hour = hour * 3600
            if at_hour > last:
                return
            if at_hour + 3599 < first:
                continue
            for minute in self.minutes:
                at_minute = at_hour + minute * 60
                if at_minute > last:
                    return
                if at_minute + 59 < first:
                    continue
                for second in self.seconds:
                    at = at_minute + second
                    if at > last:
                        return
                    if at >= first:
                        yield at

    def times_upto(self, time_of_day: int) -> int:
        """Count matching times of day at or before `time_of_day` seconds after midnight."""
        if time_of_day < 0:
            return 0
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        hour, rest = divmod(min(time_of_day, _DAY_S - 1), 3600)
        minute, second = divmod(rest, 60)
        # Whole earlier hours count every minute-second pair; the current hour only its earlier
        # minutes, and the current minute only its seconds up to `second`.
        count = bisect.bisect_left(hours, hour) * len(minutes) * len(seconds)
        if hour in hours:
            count += bisect.bisect_left(minutes, minute) * len(seconds)
            if minute in minutes:
                count += bisect.bisect_right(seconds, second)
        return count
