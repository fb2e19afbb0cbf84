"""Commit normalization (D4): the last check between a decision and the database.

A decision reaches the repository only as a `ClaimCommit`, and the only way to build one is
`normalize_commit`, which refuses anything a correct decision could not have produced.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ._contracts import ClusterScheduleClaim, ScheduleState
from ._decision import ScheduleDecision
from ._errors import InvalidDecisionError

__all__ = ["ClaimCommit", "normalize_commit"]


class ClaimCommit(BaseModel):
    """A claim paired with the decision made from it, checked by `normalize_commit`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: ClusterScheduleClaim
    decision: ScheduleDecision


def normalize_commit(
    claim: ClusterScheduleClaim,
    decision: ScheduleDecision,
    budget: int,
) -> ClaimCommit:
    """Check `decision` against `claim` and return the pair ready to commit.

    Raises:
        InvalidDecisionError: the decision observed another time than the claim's acquired time,
            belongs to another schedule, moves the cursor backwards, admits an occurrence later
            than the observation or earlier than the cursor, repeats or disorders occurrences,
            or admits more than `budget`.

    """
    acquired = claim.claim_acquired_at_ms
    if decision.observed_at_ms != acquired:
        raise InvalidDecisionError(
            "observed_at_ms",
            f"{decision.observed_at_ms} differs from claim_acquired_at_ms={acquired}",
        )
    if decision.schedule_id != claim.schedule_id:
        raise InvalidDecisionError(
            "schedule_id",
            f"decision is for schedule {decision.schedule_id}, claim for {claim.schedule_id}",
        )
    _check_occurrences(claim, decision, budget)
    _check_cursor(claim, decision)
    return ClaimCommit(claim=claim, decision=decision)


def _check_occurrences(
    claim: ClusterScheduleClaim, decision: ScheduleDecision, budget: int
) -> None:
    occurrences = decision.occurrences
    if len(occurrences) > budget:
        raise InvalidDecisionError(
            "occurrences", f"{len(occurrences)} occurrences exceed the budget of {budget}"
        )
    if len(set(occurrences)) != len(occurrences):
        raise InvalidDecisionError("occurrences", f"duplicate occurrences in {list(occurrences)}")
    if list(occurrences) != sorted(occurrences):
        raise InvalidDecisionError("occurrences", f"not oldest first: {list(occurrences)}")
    for occurrence in occurrences:
        if occurrence > claim.claim_acquired_at_ms:
            raise InvalidDecisionError(
                "occurrences",
                f"occurrence {occurrence} is later than the observation"
                f" {claim.claim_acquired_at_ms}",
            )
        if occurrence < claim.next_due_at_ms:
            raise InvalidDecisionError(
                "occurrences",
                f"occurrence {occurrence} is earlier than the cursor {claim.next_due_at_ms}",
            )


def _check_cursor(claim: ClusterScheduleClaim, decision: ScheduleDecision) -> None:
    cursor = decision.next_due_at_ms
    if cursor is None:
        if decision.state is not ScheduleState.EXHAUSTED:
            raise InvalidDecisionError(
                "next_due_at_ms", f"no cursor but state is {decision.state.value!r}"
            )
        return
    if cursor < claim.next_due_at_ms:
        raise InvalidDecisionError(
            "next_due_at_ms",
            f"cursor moves backwards from {claim.next_due_at_ms} to {cursor}",
        )
    if decision.occurrences and cursor <= decision.occurrences[-1]:
        raise InvalidDecisionError(
            "next_due_at_ms",
            f"cursor {cursor} does not pass the last admitted occurrence"
            f" {decision.occurrences[-1]}",
        )
    if decision.state is not ScheduleState.ACTIVE:
        raise InvalidDecisionError(
            "state", f"a cursor is set but state is {decision.state.value!r}"
        )
