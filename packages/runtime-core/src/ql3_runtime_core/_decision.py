"""The cron and misfire decision (SPEC §6, D4): what a claim admits, and where its cursor goes.

PLACEHOLDER: a first version without the fire_once/skip jump optimisations; issue 3 completes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ._contracts import MisfirePolicy, ScheduleState
from ._cron import next_occurrence_ms

if TYPE_CHECKING:
    from ._contracts import ClusterScheduleClaim

__all__ = ["ScheduleDecision", "resolve_cluster_schedule_decision"]


class ScheduleDecision(BaseModel):
    """What one claim decided: admitted occurrences (oldest first), new cursor and state.

    `observed_at_ms` is always the claim's `claim_acquired_at_ms` (D4); commit normalization
    refuses anything else. `skipped` counts missed occurrences the policy chose not to admit,
    so nothing is dropped silently.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    occurrences: tuple[int, ...]
    next_due_at_ms: int | None
    state: ScheduleState
    observed_at_ms: int
    skipped: int = 0


def resolve_cluster_schedule_decision(
    claim: ClusterScheduleClaim,
    budget: int,
) -> ScheduleDecision:
    """Decide what `claim` admits with at most `budget` occurrences; it reads no clock."""
    observed = claim.claim_acquired_at_ms
    definition = claim.definition
    due: list[int] = []
    cursor: int | None = claim.next_due_at_ms
    while cursor is not None and cursor <= observed and len(due) < max(budget, 0):
        if definition.end_at_ms is not None and cursor > definition.end_at_ms:
            cursor = None
            break
        due.append(cursor)
        cursor = next_occurrence_ms(definition.cron, definition.timezone, cursor)
    if cursor is not None and definition.end_at_ms is not None and cursor > definition.end_at_ms:
        cursor = None
    grace = definition.misfire_grace_ms
    on_time = [t for t in due if observed - t <= grace]
    missed = [t for t in due if observed - t > grace]
    if definition.misfire_policy is MisfirePolicy.CATCH_UP:
        admitted = due
    elif definition.misfire_policy is MisfirePolicy.FIRE_ONCE:
        admitted = missed[-1:] + on_time
    else:
        admitted = on_time
    return ScheduleDecision(
        schedule_id=claim.schedule_id,
        occurrences=tuple(admitted),
        next_due_at_ms=cursor,
        state=ScheduleState.ACTIVE if cursor is not None else ScheduleState.EXHAUSTED,
        observed_at_ms=observed,
        skipped=len(due) - len(admitted),
    )
