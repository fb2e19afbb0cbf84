"""`ql3 status` from `schedule_status.sql`: every schedule at the statement's one database instant.

Pure: every `*_in_ms` is a difference against the `now` the same statement read (rule zero),
never against this node's clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    ScheduleState,
)

from ._models import (
    ScheduleStatus,
    StatusReport,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["status_report"]

_Row = dict[str, Any]


def status_report(rows: Sequence[_Row], lease_ms: int) -> StatusReport:
    """Sum up schedule_status.sql: one row per schedule (or one without), each with the now."""
    head, *_ = rows  # every row carries the statement's one clock reading and zone rules
    now = int(head["now_ms"])
    schedules = [schedule_status(row, now, lease_ms) for row in rows if row["id"] is not None]
    dues = [s.next_due_in_ms for s in schedules if s.next_due_in_ms is not None]
    held = sum(1 for s in schedules if s.claim_expires_in_ms)
    return StatusReport(
        database_now_ms=now,
        schedules=tuple(schedules),
        claims_held=held,
        next_due_in_ms=min(dues) if dues else None,
        invalid_schedules=sum(1 for s in schedules if s.state is ScheduleState.INVALID),
        zone_rules_version=head["zone_rules_version"],
        lease_ms=lease_ms,
        schedules_overdue=sum(1 for s in schedules if s.overdue),
    )


def schedule_status(row: _Row, now: int, lease_ms: int) -> ScheduleStatus:
    state, due, expires = row["state"], row["next_due_at_ms"], row["claim_expires_at_ms"]
    active = state == ScheduleState.ACTIVE.value
    return ScheduleStatus(
        schedule_id=row["id"],
        name=row["name"],
        state=ScheduleState(state),
        next_due_at_ms=due,
        # Clamped at 0: a cursor already behind the database clock is due now, not "in -5 s".
        next_due_in_ms=max(due - now, 0) if active and due is not None else None,
        claim_owner_id=row["claim_owner_id"],
        claim_expires_in_ms=max(expires - now, 0) if expires is not None else None,
        version=row["version"],
        runs_admitted=row["runs"],
        manual_runs=row["manual_runs"],
        backfilled_runs=row["backfilled_runs"],
        last_admitted_at_ms=row["last_admitted_at_ms"],
        invalid_reason=row["invalid_reason"],
        invalidated_at_ms=row["invalidated_at_ms"],
        # A healthy replica may hold a due schedule for a whole lease, and the misfire grace is
        # lateness the schedule accepts: only beyond both is the cursor stuck.
        overdue=active and due is not None and now - due > lease_ms + row["misfire_grace_ms"],
        start_at_ms=row["start_at_ms"],
        end_at_ms=row["end_at_ms"],
        overlap=row["overlap"],
        max_running=row["max_running"],
    )
