"""Where adopting other zone rules moves one schedule, decided without the database.

Pure functions of the schedule's definition and cursor, the old and the new rules, the instant the
new rules take effect (the adopt statement's database clock reading) and the schedule's latest
decided occurrence (read by the caller after locking the row). An occurrence belongs to the rules
in force when it falls due:

- the old rules' occurrences from the cursor up to the instant of the switch were due under them
  and nobody decided them (the row is locked, claims on it are fenced): they get one skip record,
  reason `zone_rules_changed`, naming both versions, never a run;
- the new cursor is the first occurrence under the new rules strictly after max(the switch,
  `start_at_ms - 1`, the latest decided occurrence); past `end_at_ms` the schedule is exhausted.

The live revision ends where the old rules' cursor would be after the skipped range, so its range
holds exactly the occurrences the old rules had due; the revision the switch opens starts at the
new cursor. Without the old rules' data (a version recorded before the database kept rule data,
during which no replica could decide anything) nothing can be counted under them: no record is
written, and the cursor moves only to the new rules' first occurrence at or after it, so the
misfire policy decides everything from there under the new rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ql3_runtime_core import (
    InvalidCronError,
    ScheduleState,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
)

if TYPE_CHECKING:
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

__all__ = ["ZoneMove", "plan_zone_move"]


@dataclass(frozen=True)
class ZoneMove:
    """What adopting other zone rules does to one schedule.

    `skipped_count` is 0 when nothing was due under the old rules (then `skipped_first_ms` and
    `skipped_last_ms` are None). `old_end_cursor_ms` is where the live revision ends;
    `cursor_after_ms` is None when the schedule is exhausted under the new rules.
    """

    schedule_id: int
    name: str
    timezone: str
    state_before: ScheduleState
    cursor_before_ms: int
    cursor_after_ms: int | None
    state_after: ScheduleState
    old_end_cursor_ms: int
    skipped_count: int = 0
    skipped_first_ms: int | None = None
    skipped_last_ms: int | None = None

    @property
    def moved(self) -> bool:
        """True when the cursor (or the state) changes."""
        return (self.cursor_after_ms, self.state_after) != (
            self.cursor_before_ms,
            self.state_before,
        )


def plan_zone_move(
    schedule_id: int,
    name: str,
    definition: ScheduleDefinition,
    state: ScheduleState,
    cursor_ms: int,
    *,
    old_rules: ZoneRules | None,
    new_rules: ZoneRules,
    took_effect_at_ms: int,
    decided_ms: int | None,
) -> ZoneMove:
    """Plan one schedule's move when `new_rules` take effect at `took_effect_at_ms`.

    `old_rules` None: the old rules' data is not known (nothing is counted under them).
    """
    skipped = None
    old_end = cursor_ms
    if old_rules is not None:
        skipped = _due_under_old_rules(definition, cursor_ms, old_rules, took_effect_at_ms)
    if old_rules is not None and skipped is not None:
        # The old rules' cursor after the skipped range: where the live revision's range ends.
        old_end = _following(definition, skipped[1], old_rules) or skipped[1] + 1
    # Without the old rules nothing tells what they had due: the cursor stays as far as the new
    # rules allow (their first occurrence at or after it), and the misfire policy decides what
    # is due, all of it under the new rules.
    # `cursor_ms - 1`: the search is strictly after, and the cursor itself may be an occurrence.
    after = took_effect_at_ms if old_rules is not None else cursor_ms - 1
    if definition.start_at_ms is not None:
        after = max(after, definition.start_at_ms - 1)
    if decided_ms is not None:
        after = max(after, decided_ms)
    cursor_after = _following(definition, after, new_rules)
    if cursor_after is not None and (
        definition.end_at_ms is not None and cursor_after > definition.end_at_ms
    ):
        cursor_after = None
    state_after = ScheduleState.EXHAUSTED if cursor_after is None else state
    first, last, count = skipped if skipped is not None else (None, None, 0)
    return ZoneMove(
        schedule_id=schedule_id,
        name=name,
        timezone=definition.timezone,
        state_before=state,
        cursor_before_ms=cursor_ms,
        cursor_after_ms=cursor_after,
        state_after=state_after,
        old_end_cursor_ms=old_end,
        skipped_count=count,
        skipped_first_ms=first,
        skipped_last_ms=last,
    )


def _due_under_old_rules(
    definition: ScheduleDefinition, cursor_ms: int, rules: ZoneRules, until_ms: int
) -> tuple[int, int, int] | None:
    """Return (first, last, count) of the old rules' occurrences in [cursor, until], if any.

    The cursor is the first undecided occurrence, so each of them fell due and nobody decided it.
    """
    low = cursor_ms if definition.start_at_ms is None else max(cursor_ms, definition.start_at_ms)
    high = until_ms if definition.end_at_ms is None else min(until_ms, definition.end_at_ms)
    if low > high:
        return None
    cron, zone = definition.cron, definition.timezone
    last = latest_occurrence_ms(cron, zone, high, low, rules=rules)
    if last is None:
        return None
    # `low - 1`: strictly after, so an occurrence exactly at `low` is the first one skipped.
    first = next_occurrence_ms(cron, zone, low - 1, rules=rules)
    return first, last, count_occurrences_ms(cron, zone, first, last, rules=rules)


def _following(definition: ScheduleDefinition, after_ms: int, rules: ZoneRules) -> int | None:
    """Return the first occurrence strictly after `after_ms`, or None when none is left."""
    try:
        return next_occurrence_ms(definition.cron, definition.timezone, after_ms, rules=rules)
    except InvalidCronError:  # no occurrence before the end of the engine's range
        return None
