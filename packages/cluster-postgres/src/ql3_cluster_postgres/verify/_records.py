"""The rows verify reads, as the rules pass them around: schedules, revisions, skip records.

Plain values with no behaviour, at the bottom of the room: every rule module imports them and
they import no rule, so the rules can be read (and imported) one at a time, in any order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

__all__ = ["Revision", "RunCounts", "Schedule", "Skip", "Window"]


@dataclass(frozen=True)
class Schedule:
    """One readable schedule row as read (`verify_schedules.sql`), its definition rebuilt."""

    id: int
    task_id: int
    name: str
    definition: ScheduleDefinition
    state: str
    next_due_at_ms: int | None
    claim_owner_id: str | None
    claim_expires_at_ms: int | None
    updated_at_ms: int
    created_at_ms: int


@dataclass
class RunCounts:
    """What one schedule's runs add up to: from the sequence (newest, early) and the stream."""

    runs: int = 0
    admitted: int = 0  # distinct occurrences
    early: int = 0
    latest_ms: int | None = None  # the latest admitted occurrence
    newest_id: int | None = None  # the newest run (highest id) and its commit time
    newest_created_ms: int = 0


@dataclass(frozen=True)
class Revision:
    """One schedule revision as read (`verify_revisions.sql`), with the zone rules it names."""

    schedule_id: int
    revision: int
    reason: str
    definition: ScheduleDefinition | None  # None: the stored definition cannot be read
    first_cursor_ms: int | None
    end_cursor_ms: int | None
    placed_after_ms: int | None
    created_at_ms: int
    ended_at_ms: int | None
    decided_before_ms: int | None
    zone_rules_version: str
    rules: ZoneRules | None  # None: that version's rule data is not stored


@dataclass(frozen=True)
class Skip:
    """One skip record, read by name (`verify_schedule_skips.sql` selects these columns).

    A `misfire` record has a policy and a claim; a `zone_rules_changed` one names both versions.
    """

    id: int
    schedule_id: int
    first_skipped_ms: int
    last_skipped_ms: int
    skipped_count: int
    reason: str
    misfire_policy: str | None
    claim_acquired_at_ms: int | None
    zone_rules_from: str | None
    zone_rules_to: str | None
    created_at_ms: int


@dataclass(frozen=True)
class Window:
    """One revision's range of occurrences to account for: [low, high) under its rules."""

    revision: Revision
    definition: ScheduleDefinition
    rules: ZoneRules
    low: int
    # Exclusive, because a revision ends at a cursor: the cursor itself is still undecided and
    # belongs to whichever revision comes next.
    high: int
