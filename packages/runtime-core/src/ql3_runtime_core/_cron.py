"""Cron occurrence engine (DESIGN §4): QL3's dialect matches wall times, zones map them to instants.

The dialect (fields, names, ranges, steps, `?`, nicknames, Vixie's rule for the two day fields) is
the table in runtime-core's README, implemented by `_cron_fields` alone; this module walks the
matching wall times and decides which absolute instants they denote. The rules (Vixie cron's DST
behaviour):

- An expression is *interval-like* when its seconds field (if present), its minutes field or its
  hours field starts with `*` (`*/5 * * * *`, `0 * * * *`, `* * * * * *`); otherwise it is
  *fixed-time* (`30 1 * * *`, `0 0,30 9-17 * * 1-5`).
- Interval-like expressions follow absolute time: every instant whose local wall time matches is an
  occurrence. In a fall-back fold both instances of a repeated wall time fire; wall times inside a
  spring-forward gap do not exist and do not fire.
- Fixed-time expressions fire each matching wall time once: an unambiguous wall time at its
  instant, a repeated (fold) wall time only at its first instance, and a skipped (gap) wall time at
  the first valid instant after the gap, i.e. the transition instant. Several wall times mapping to
  one instant fire once.

Occurrences are whole seconds; the public functions speak epoch milliseconds. The engine assumes a
zone changes its UTC offset at most once within any 24 hours, true of every IANA zone in use.
Zones come from the `rules` argument of each function (a `ZoneRules`: the rules a database
recorded), or from this node's pinned tzdata wheel when none is given; never from the node's zone
files. Nothing here reads a clock (rule zero): every instant comes from the caller.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from ._cron_fields import CronFields, normalize_expression, parse_expression
from ._errors import InvalidArgumentError, InvalidCronError
from ._limits import EPOCH_MS_MAX, EPOCH_MS_MIN, PREVIEW_COUNT_MAX
from ._zones import ZoneRules, wheel_zone_rules

if TYPE_CHECKING:
    from collections.abc import Iterator
    from zoneinfo import ZoneInfo

__all__ = [
    "count_occurrences_ms",
    "is_interval_like",
    "latest_occurrence_ms",
    "next_occurrence_ms",
    "occurrences_after_ms",
    "preview_occurrences",
    "validate_cron_expression",
]

_DAY_S: Final = 86_400
_MS: Final = 1_000
_CACHE_SIZE: Final = 1_024
# The last instant (and wall) the engine computes with: datetime ends with the year 9999, and
# EPOCH_MS_MAX leaves a day for UTC offsets. A search running past it finds no occurrence.
_LAST_S: Final = EPOCH_MS_MAX // _MS
_NONE_LEFT: Final = "no occurrence before 9999-12-30"


def validate_cron_expression(expression: str) -> str:
    """Return the expression normalized, or raise `InvalidCronError` naming field and token.

    Normalized: whitespace collapsed to single spaces and a nickname (`@daily`) replaced by its
    5-field equivalent (`0 0 * * *`), so a stored expression always has 5 or 6 fields. Refused:
    anything outside the dialect of runtime-core's README (`R`, `H`, `L`, `W`, `#`, `9-1`, `*/0`,
    `61`, `@reboot`, ...) and expressions that can never fire (`0 0 30 2 *`).
    """
    normalized = normalize_expression(expression)
    _parse_once(normalized, expression)
    return normalized


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_once(normalized: str, expression: str) -> CronFields:
    """Parse once per expression: every claim revalidates its definition (hot path)."""
    return parse_expression(normalized, expression)


def next_occurrence_ms(
    expression: str, timezone: str, after_ms: int, *, rules: ZoneRules | None = None
) -> int:
    """Return the first occurrence strictly after `after_ms` (epoch ms), by the DST rules above.

    `rules` are the zone rules to compute with (default: this node's tzdata wheel), as for every
    function of this module.
    """
    return _next_occurrence_ms(expression, timezone, after_ms, rules or wheel_zone_rules())


# Schedules sharing an expression ask the very same question every cycle (all every-second
# schedules step from the same instant): the answer is pure, so remember recent ones. It was a
# third of a replica's CPU in the lateness benchmark.
@functools.lru_cache(maxsize=65_536)
def _next_occurrence_ms(expression: str, timezone: str, after_ms: int, rules: ZoneRules) -> int:
    schedule = _compile(expression, timezone, rules)
    # Occurrences are whole seconds: the first second strictly after `after_ms` is floor + 1
    # (for 1500 ms it is second 2; for 2000 ms, second 3).
    return schedule.next_at_or_after(after_ms // _MS + 1) * _MS


def latest_occurrence_ms(
    expression: str,
    timezone: str,
    at_or_before_ms: int,
    not_before_ms: int,
    *,
    rules: ZoneRules | None = None,
) -> int | None:
    """Return the latest occurrence in `[not_before_ms, at_or_before_ms]` (epoch ms), or None.

    It is derived from `next_occurrence_ms` by galloping and bisection, so both always agree,
    and it never enumerates the occurrences in between (an every-second schedule after a week
    of outage costs a few dozen steps).
    """
    schedule = _compile(expression, timezone, rules or wheel_zone_rules())
    low_s = -(-not_before_ms // _MS)  # ceil: occurrences are whole seconds
    found = schedule.latest_at_or_before(at_or_before_ms // _MS, low_s)
    return None if found is None else found * _MS


def count_occurrences_ms(
    expression: str,
    timezone: str,
    first_ms: int,
    last_ms: int,
    *,
    rules: ZoneRules | None = None,
) -> int:
    """Return how many occurrences lie in `[first_ms, last_ms]`, without enumerating them.

    Within a stretch of constant UTC offset, occurrences and matching wall times correspond one to
    one, so the count is arithmetic: matching dates (counted a month at a time) times the
    time-of-day combinations, with partial days at the edges. DST changes split
    the range (interval-like) or merge the wall times of a gap into one instant (fixed-time).
    """
    schedule = _compile(expression, timezone, rules or wheel_zone_rules())
    return schedule.count_between(-(-first_ms // _MS), last_ms // _MS)


def occurrences_after_ms(
    expression: str, timezone: str, after_ms: int, *, rules: ZoneRules | None = None
) -> Iterator[int]:
    """Yield the occurrences strictly after `after_ms` (epoch ms), oldest first, one at a time.

    The same instants as asking `next_occurrence_ms` again from each one (a property test pins
    it), for a small fraction of the cost per occurrence: inside a stretch of constant UTC offset
    (at most a day) the matching wall times are walked directly, and only the step into the next
    stretch uses `next_occurrence_ms`'s search. Made for checking a long history occurrence by
    occurrence (`ql3 verify`: ten million runs). Like `next_occurrence_ms`, it raises
    `InvalidCronError` when no occurrence is left before 9999-12-30.
    """
    schedule = _compile(expression, timezone, rules or wheel_zone_rules())
    return schedule.occurrences_ms(after_ms // _MS + 1)


def preview_occurrences(
    expression: str,
    timezone: str,
    after_ms: int,
    count: int,
    *,
    rules: ZoneRules | None = None,
) -> list[int]:
    """Return the next `count` occurrences strictly after `after_ms`, as epoch ms, oldest first.

    Raises:
        InvalidArgumentError: `count` outside 0..`PREVIEW_COUNT_MAX`, or `after_ms` outside
            `EPOCH_MS_MIN`..`EPOCH_MS_MAX`.
        InvalidCronError, UnknownTimezoneError: bad expression or zone, or no occurrence left
            before the end of the engine's range.

    """
    if not 0 <= count <= PREVIEW_COUNT_MAX:
        raise InvalidArgumentError("count", count, f"must be within 0..{PREVIEW_COUNT_MAX}")
    if not EPOCH_MS_MIN <= after_ms <= EPOCH_MS_MAX:
        raise InvalidArgumentError(
            "after_ms", after_ms, f"must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX} (epoch ms)"
        )
    schedule = _compile(expression, timezone, rules or wheel_zone_rules())
    result: list[int] = []
    current_s = after_ms // _MS
    for _ in range(count):
        current_s = schedule.next_at_or_after(current_s + 1)
        result.append(current_s * _MS)
    return result


def is_interval_like(expression: str) -> bool:
    """Tell whether the expression follows absolute time (see the module docstring)."""
    return _parse_once(normalize_expression(expression), expression).interval_like


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(expression: str, timezone: str, rules: ZoneRules) -> _Schedule:
    normalized = normalize_expression(expression)
    return _Schedule(expression, _parse_once(normalized, expression), rules.timezone(timezone))


class _Schedule:
    """A parsed expression in one zone; instants and walls are integer seconds.

    A *wall* is a local wall time counted in seconds from 1970-01-01T00:00 local (naive): its day
    is `wall // 86400` days after 1970-01-01 and its time of day `wall % 86400`.
    """

    def __init__(self, expression: str, fields: CronFields, zone: ZoneInfo) -> None:
        self.expression = expression
        self.fields = fields
        self.zone = zone
        self.interval_like = fields.interval_like
        # The earliest matching time of any matching day: where a search that moved to the next
        # matching day lands.
        self._first_time = fields.hours[0] * 3600 + fields.minutes[0] * 60 + fields.seconds[0]

    def next_wall(self, wall: int) -> int:
        """Return the first matching wall at or after `wall` (this day by bisection, or later)."""
        day, time_of_day = divmod(wall, _DAY_S)
        if self.fields.day_matches(day):
            found = self.fields.next_time(time_of_day)
            if found is not None:
                return day * _DAY_S + found
        next_day = self.fields.next_day(day + 1)
        if next_day is None or next_day * _DAY_S + self._first_time > _LAST_S:
            raise InvalidCronError(self.expression, _NONE_LEFT)
        return next_day * _DAY_S + self._first_time

    def offset(self, instant: int) -> int:
        """Return the zone's UTC offset in seconds at `instant`."""
        # An instant has exactly one offset (only walls are ambiguous), so no fold is needed.
        utcoffset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        return 0 if utcoffset is None else int(utcoffset.total_seconds())

    def instants(self, wall: int) -> tuple[int, int]:
        """Return the wall's instants for fold 0 and fold 1 (PEP 495).

        Equal: unambiguous. fold0 < fold1: repeated (fold). fold0 > fold1: skipped (gap).
        """
        naive = _EPOCH_NAIVE + timedelta(seconds=wall)
        result: list[int] = []
        for fold in (0, 1):
            utcoffset = self.zone.utcoffset(naive.replace(tzinfo=self.zone, fold=fold))
            result.append(wall - (0 if utcoffset is None else int(utcoffset.total_seconds())))
        return result[0], result[1]

    def transition_in(self, low: int, high: int) -> int:
        """Return the first instant in `(low, high]` whose offset differs from `low`'s.

        The caller guarantees exactly one transition in the range (it is shorter than a day).
        """
        base = self.offset(low)
        while high - low > 1:
            middle = (low + high) // 2
            if self.offset(middle) == base:
                low = middle
            else:
                high = middle
        return high

    def first_transition(self, start: int, end: int) -> int | None:
        """Return the first offset change in `(start, end]`, scanning a day at a time, or None."""
        base = self.offset(start)
        previous = start
        while previous < end:
            # At most one change per day (the module's assumption), so a day's two ends having
            # the same offset means none in between.
            probe = min(previous + _DAY_S, end)
            if self.offset(probe) != base:
                return self.transition_in(previous, probe)
            previous = probe
        return None

    def next_at_or_after(self, start: int) -> int:
        """Return the first occurrence at or after instant `start`, up to `_LAST_S`."""
        if start > _LAST_S:
            raise InvalidCronError(self.expression, _NONE_LEFT)
        if self.interval_like:
            found = self._next_interval(start)
        else:
            found = self._map_fixed(self.next_wall(self._lowest_fixed_wall(start)))
        if found > _LAST_S:
            raise InvalidCronError(self.expression, _NONE_LEFT)
        return found

    def occurrences_ms(self, start: int) -> Iterator[int]:
        """Yield every occurrence at or after instant `start`, in epoch ms, oldest first.

        Within `(current, last]`, instants whose UTC offset is that of `current`, every instant
        has exactly one wall time and the matching walls are the occurrences, for both kinds of
        expression: a fixed-time occurrence is never the second instance of a repeated wall (so
        no repeated wall follows it within its offset), and gap walls fire at the transition,
        which starts the next stretch and is found by the search.
        """
        current = self.next_at_or_after(start)
        while True:
            yield current * _MS
            offset = self.offset(current)
            # One day ahead at most, so the stretch holds at most one transition to look for.
            horizon = min(current + _DAY_S, _LAST_S)
            transition = self.first_transition(current, horizon)
            last = horizon if transition is None else transition - 1
            yield from self._walls_ms(current + offset + 1, last + offset, offset)
            current = self.next_at_or_after(last + 1)

    def _walls_ms(self, low: int, high: int, offset: int) -> Iterator[int]:
        """Yield the matching walls in `[low, high]` as instants (ms) at a constant offset."""
        fields = self.fields
        for day in range(low // _DAY_S, high // _DAY_S + 1):
            if fields.day_matches(day):
                base = day * _DAY_S
                instant = base - offset
                for at in fields.times_between(max(low - base, 0), min(high - base, _DAY_S - 1)):
                    yield (instant + at) * _MS

    def _next_interval(self, start: int) -> int:
        # Walk constant-offset segments: inside one, walls and instants correspond one to one.
        while True:
            offset = self.offset(start)
            candidate = self.next_wall(start + offset) - offset
            transition = self.first_transition(start, candidate)
            if transition is None:
                return candidate
            start = transition

    def _lowest_fixed_wall(self, start: int) -> int:
        """Return the lowest wall whose fixed-time instant is at or after `start`.

        Fixed-time instants are non-decreasing in wall order, so the first matching wall from
        here is the answer.
        """
        offset = self.offset(start)
        before = self.offset(start - 1)
        if before != offset:
            # `start` is a transition: gap walls map to it; repeated walls already fired.
            return start + before
        if datetime.fromtimestamp(start, self.zone).fold == 1:
            # Second instance of a repeated wall: every repeated wall fired at its first instance,
            # so continue at the end of the fold.
            first_instance, _ = self.instants(start + offset)
            transition = self.transition_in(first_instance, start)
            return transition + self.offset(transition - 1)
        return start + offset

    def _map_fixed(self, wall: int) -> int:
        fold0, fold1 = self.instants(wall)
        if fold0 <= fold1:
            return fold0  # unambiguous, or the first instance of a repeated wall
        return self.transition_in(fold1, fold0)  # a skipped wall fires when the gap ends

    def count_between(self, first: int, last: int) -> int:
        """Return the number of occurrences in `[first, last]` (instants)."""
        if last < first:
            return 0
        if self.interval_like:
            total, start = 0, first
            while True:
                offset = self.offset(start)
                transition = self.first_transition(start, last)
                end = last if transition is None else transition - 1
                total += self._count_walls(start + offset, end + offset)
                if transition is None:
                    return total
                start = transition
        # Fixed-time: count the matching walls between the walls that map to `first` and to just
        # after `last` (fixed-time instants are non-decreasing in wall order), then correct for
        # gaps, where several walls share one instant. Folds need no correction: their second
        # instances are not walls of their own in this count.
        total = self._count_walls(
            self._lowest_fixed_wall(first), self._lowest_fixed_wall(last + 1) - 1
        )
        start = first - 1
        while (transition := self.first_transition(start, last)) is not None:
            before, after = self.offset(transition - 1), self.offset(transition)
            if after > before:
                # The gap's wall times and the wall time ending it all denote the transition.
                total -= max(self._count_walls(transition + before, transition + after) - 1, 0)
            start = transition
        return total

    def _count_walls(self, low: int, high: int) -> int:
        """Return the number of matching walls in `[low, high]`."""
        if high < low:
            return 0
        # Whole days in the middle count `per_day` each; the two edge days count only the part
        # of their times inside the range.
        days, times_upto = self.fields.count_days, self.fields.times_upto
        first_day, last_day = low // _DAY_S, high // _DAY_S
        low_time, high_time = low % _DAY_S, high % _DAY_S
        if first_day == last_day:
            within = times_upto(high_time) - times_upto(low_time - 1)
            return within if days(first_day, first_day) else 0
        per_day = times_upto(_DAY_S - 1)
        total = per_day * days(first_day + 1, last_day - 1)
        if days(first_day, first_day):
            total += per_day - times_upto(low_time - 1)
        if days(last_day, last_day):
            total += times_upto(high_time)
        return total

    def latest_at_or_before(self, end: int, low: int) -> int | None:
        """Return the latest occurrence in `[low, end]` (instants), or None."""
        if low > end or self.next_at_or_after(low) > end:
            return None
        # Invariant: an occurrence lies in [found_from, end]; none lies in [above, end].
        above = end + 1
        # Gallop back from `end` (1, 2, 4, ... seconds) until an occurrence is in reach, then
        # bisect: log steps even after a week of every-second occurrences.
        step = 1
        while True:
            found_from = max(low, end + 1 - step)
            if self.next_at_or_after(found_from) <= end:
                break
            above = found_from
            step *= 2
        while above - found_from > 1:
            middle = (found_from + above) // 2
            if self.next_at_or_after(middle) <= end:
                found_from = middle
            else:
                above = middle
        return self.next_at_or_after(found_from)


# Walls are counted from this naive midnight; `instants` turns them back into local datetimes.
_EPOCH_NAIVE: Final = datetime(1970, 1, 1, tzinfo=UTC).replace(tzinfo=None)
