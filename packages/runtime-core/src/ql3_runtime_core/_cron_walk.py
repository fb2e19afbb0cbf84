"""The zone-transition walk of the occurrence engine: matching wall times to instants (DESIGN §4).

`_cron` holds the public API and the DST rules in its docstring; this module applies them. A
`Schedule` is one parsed expression in one zone. It speaks integer seconds: an *instant* counts from
the epoch, a *wall* from 1970-01-01T00:00 local time (naive). Within a stretch of constant UTC
offset, walls and instants correspond one to one, so the walk finds the zone's offset changes
(bisection, at most one a day) and does plain arithmetic in between: the next match, a count, the
latest match by galloping, a stream of occurrences. Nothing here reads a clock (rule zero).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from ._errors import InvalidCronError
from ._limits import EPOCH_MS_MAX

if TYPE_CHECKING:
    from collections.abc import Iterator
    from zoneinfo import ZoneInfo

    from ._cron_fields import CronFields

DAY_S: Final = 86_400
MS: Final = 1_000
# The last instant (and wall) the engine computes with: datetime ends with the year 9999, and
# EPOCH_MS_MAX leaves a day for UTC offsets. A search running past it finds no occurrence.
LAST_S: Final = EPOCH_MS_MAX // MS
_NONE_LEFT: Final = "no occurrence before 9999-12-30"


class Schedule:
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
        day, time_of_day = divmod(wall, DAY_S)
        if self.fields.day_matches(day):
            found = self.fields.next_time(time_of_day)
            if found is not None:
                return day * DAY_S + found
        next_day = self.fields.next_day(day + 1)
        if next_day is None or next_day * DAY_S + self._first_time > LAST_S:
            raise InvalidCronError(self.expression, _NONE_LEFT)
        return next_day * DAY_S + self._first_time

    def offset(self, instant: int) -> int:
        """Return the zone's UTC offset in seconds at `instant`."""
        # An instant has exactly one offset (only walls are ambiguous), so no fold is needed.
        utcoffset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        return 0 if utcoffset is None else int(utcoffset.total_seconds())

    def instants(self, wall: int) -> tuple[int, int]:
        """Return the wall's instants for fold 0 and fold 1 (PEP 495).

        Equal: unambiguous. fold0 < fold1: repeated (fold). fold0 > fold1: skipped (gap).
        """
        # zoneinfo answers the offset of a local datetime for either fold; asking both is how a
        # wall tells whether it is repeated or skipped without scanning the transitions.
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
            probe = min(previous + DAY_S, end)
            if self.offset(probe) != base:
                return self.transition_in(previous, probe)
            previous = probe
        return None

    def next_at_or_after(self, start: int) -> int:
        """Return the first occurrence at or after instant `start`, up to `LAST_S`."""
        if start > LAST_S:
            raise InvalidCronError(self.expression, _NONE_LEFT)
        if self.interval_like:
            found = self._next_interval(start)
        else:
            found = self._map_fixed(self.next_wall(self._lowest_fixed_wall(start)))
        if found > LAST_S:
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
            yield current * MS
            offset = self.offset(current)
            # One day ahead at most, so the stretch holds at most one transition to look for.
            horizon = min(current + DAY_S, LAST_S)
            transition = self.first_transition(current, horizon)
            last = horizon if transition is None else transition - 1
            # Walls strictly after `current`'s own wall (already yielded) up to the stretch's end,
            # all at `current`'s offset: no search per occurrence inside the stretch.
            yield from self._walls_ms(current + offset + 1, last + offset, offset)
            current = self.next_at_or_after(last + 1)

    def _walls_ms(self, low: int, high: int, offset: int) -> Iterator[int]:
        """Yield the matching walls in `[low, high]` as instants (ms) at a constant offset."""
        fields = self.fields
        for day in range(low // DAY_S, high // DAY_S + 1):
            if fields.day_matches(day):
                base = day * DAY_S
                instant = base - offset
                for at in fields.times_between(max(low - base, 0), min(high - base, DAY_S - 1)):
                    yield (instant + at) * MS

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
            # Interval-like: every matching wall of each constant-offset stretch is one occurrence
            # (a fold's walls fire twice because they lie in two stretches), so sum per stretch.
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
        first_day, last_day = low // DAY_S, high // DAY_S
        low_time, high_time = low % DAY_S, high % DAY_S
        if first_day == last_day:
            within = times_upto(high_time) - times_upto(low_time - 1)
            return within if days(first_day, first_day) else 0
        per_day = times_upto(DAY_S - 1)
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
