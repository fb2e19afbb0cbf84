"""What a resume writes for a paused span: which occurrences are recorded `paused` (DESIGN §7).

Pure: a function of the schedule's definition, the cursor the pause kept (the first occurrence
nobody decided), the instant the span ends (the database time of a manual resume, or the until of
an automatic one, both read from the database by the caller) and the replay chosen. Occurrences
are computed with `rules`, the zone rules the database records, never this node's tzdata or
clock. The SQL function that writes the result (`ql3.resume_pause_v1`) re-checks the cursor, the
rules version and the end against the locked row and the database clock.

The span's occurrences are those in [cursor, end], inside the schedule's window:
- `skip`: all are recorded `paused`; the cursor moves to the first occurrence after the end.
- `fire_once`: all but the latest are recorded; the cursor is the latest, so the Coordinator
  decides it as any late occurrence (its misfire policy and grace still apply).
- `catch_up`: none is recorded; the cursor stays, the Coordinator decides them all.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from ql3_runtime_core import (
    InvalidArgumentError,
    InvalidCronError,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
)

if TYPE_CHECKING:
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

__all__ = ["Replay", "SpanPlan", "plan_span", "replay_of"]


class Replay(StrEnum):
    """Which occurrences of a paused span a resume hands back to the Coordinators."""

    SKIP = "skip"
    FIRE_ONCE = "fire_once"
    CATCH_UP = "catch_up"


def replay_of(value: str) -> Replay:
    """Return the replay named `value`, or raise `InvalidArgumentError` naming `replay`."""
    try:
        return Replay(value)
    except ValueError:
        raise InvalidArgumentError(
            "replay", value, "must be one of skip, fire_once, catch_up"
        ) from None


class SpanPlan(NamedTuple):
    """The `paused` skip record (count 0: none) and the cursor and state after the resume."""

    first_ms: int | None
    last_ms: int | None
    skipped: int
    next_cursor_ms: int | None
    state: str


def _after(definition: ScheduleDefinition, after_ms: int, rules: ZoneRules) -> int | None:
    """Return the first occurrence strictly after `after_ms` inside the window, or None."""
    low = after_ms
    if definition.start_at_ms is not None:
        low = max(low, definition.start_at_ms - 1)
    try:
        found = next_occurrence_ms(definition.cron, definition.timezone, low, rules=rules)
    except InvalidCronError:  # no occurrence before the end of the engine's range
        return None
    if definition.end_at_ms is not None and found > definition.end_at_ms:
        return None
    return found


def plan_span(
    definition: ScheduleDefinition,
    cursor_ms: int,
    end_ms: int,
    replay: Replay,
    rules: ZoneRules,
) -> SpanPlan:
    """Plan the resume of a span from its first undecided occurrence `cursor_ms` to `end_ms`."""
    if replay is Replay.CATCH_UP:
        return SpanPlan(None, None, 0, cursor_ms, "active")
    low = cursor_ms if definition.start_at_ms is None else max(cursor_ms, definition.start_at_ms)
    high = end_ms if definition.end_at_ms is None else min(end_ms, definition.end_at_ms)
    cron, zone = definition.cron, definition.timezone
    last = latest_occurrence_ms(cron, zone, high, low, rules=rules) if low <= high else None
    if last is None:
        # Nothing fell due in the span: the cursor stays where it was.
        return SpanPlan(None, None, 0, cursor_ms, "active")
    first = next_occurrence_ms(cron, zone, low - 1, rules=rules)
    if replay is Replay.FIRE_ONCE:
        # The latest is handed back: the record covers the ones before it, if any.
        if first == last:
            return SpanPlan(None, None, 0, last, "active")
        before = latest_occurrence_ms(cron, zone, last - 1, low, rules=rules)
        if before is None:  # first < last: never, but an empty record is never written
            return SpanPlan(None, None, 0, last, "active")
        count = count_occurrences_ms(cron, zone, first, before, rules=rules)
        return SpanPlan(first, before, count, last, "active")
    count = count_occurrences_ms(cron, zone, first, last, rules=rules)
    following = _after(definition, max(last, end_ms), rules)
    return SpanPlan(first, last, count, following, "exhausted" if following is None else "active")
