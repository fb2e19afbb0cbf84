"""Cron occurrence engine (DESIGN §4): QL3's dialect matches wall times, zones map them to instants.

The dialect (fields, names, ranges, steps, `?`, nicknames, Vixie's rule for the two day fields) is
the table in runtime-core's README, implemented by `_cron_fields` alone; `_cron_walk` walks the
matching wall times and decides which absolute instants they denote, and this module is the API
over it (epoch milliseconds in and out, argument checks, caches). The rules (Vixie cron's DST
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
from typing import TYPE_CHECKING, Final

from ._cron_fields import CronFields, normalize_expression, parse_expression
from ._cron_walk import MS, Schedule
from ._errors import InvalidArgumentError
from ._limits import EPOCH_MS_MAX, EPOCH_MS_MIN, PREVIEW_COUNT_MAX
from ._zones import ZoneRules, wheel_zone_rules

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "count_occurrences_ms",
    "is_interval_like",
    "latest_occurrence_ms",
    "next_occurrence_ms",
    "occurrences_after_ms",
    "preview_occurrences",
    "validate_cron_expression",
]

_CACHE_SIZE: Final = 1_024


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
    return schedule.next_at_or_after(after_ms // MS + 1) * MS


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
    low_s = -(-not_before_ms // MS)  # ceil: occurrences are whole seconds
    found = schedule.latest_at_or_before(at_or_before_ms // MS, low_s)
    return None if found is None else found * MS


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
    return schedule.count_between(-(-first_ms // MS), last_ms // MS)


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
    return schedule.occurrences_ms(after_ms // MS + 1)


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
    current_s = after_ms // MS
    for _ in range(count):
        current_s = schedule.next_at_or_after(current_s + 1)
        result.append(current_s * MS)
    return result


def is_interval_like(expression: str) -> bool:
    """Tell whether the expression follows absolute time (see the module docstring)."""
    return _parse_once(normalize_expression(expression), expression).interval_like


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(expression: str, timezone: str, rules: ZoneRules) -> Schedule:
    normalized = normalize_expression(expression)
    return Schedule(expression, _parse_once(normalized, expression), rules.timezone(timezone))
