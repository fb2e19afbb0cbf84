"""Cycle summary (D6): what one Coordinator cycle claimed and admitted, in database time only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ._repository import CommitStatus

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._contracts import ClusterScheduleClaim
    from ._repository import CommitOutcome

__all__ = ["CycleSummary", "summarize_cycle"]


class CycleSummary(BaseModel):
    """One cycle, reported without inventing a node-level observation.

    `first_claim_acquired_at_ms` / `last_claim_acquired_at_ms` are the acquired times of the
    cycle's first and last claim, in claim order, or None for a cycle that claimed nothing.
    `quarantined` counts schedules this cycle put in state `invalid` (unreadable or undecidable).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    owner_id: str
    claims: int
    admitted: int
    committed: int
    raced: int
    clock_regressed: int
    uncertain: int
    skipped: int
    serialization_retries: int
    quarantined: int = 0
    first_claim_acquired_at_ms: int | None
    last_claim_acquired_at_ms: int | None


def summarize_cycle(
    owner_id: str,
    claims: Sequence[ClusterScheduleClaim],
    outcomes: Sequence[CommitOutcome],
    *,
    skipped: int = 0,
    serialization_retries: int = 0,
    quarantined: int = 0,
) -> CycleSummary:
    """Summarize a cycle from its claims (in claim order) and its commit outcomes."""

    def count(status: CommitStatus) -> int:
        return sum(1 for outcome in outcomes if outcome.status is status)

    return CycleSummary(
        owner_id=owner_id,
        claims=len(claims),
        admitted=sum(len(outcome.runs) for outcome in outcomes),
        committed=count(CommitStatus.COMMITTED),
        raced=count(CommitStatus.RACED),
        clock_regressed=count(CommitStatus.CLOCK_REGRESSED),
        uncertain=count(CommitStatus.UNCERTAIN),
        skipped=skipped,
        serialization_retries=serialization_retries,
        quarantined=quarantined,
        first_claim_acquired_at_ms=claims[0].claim_acquired_at_ms if claims else None,
        last_claim_acquired_at_ms=claims[-1].claim_acquired_at_ms if claims else None,
    )
