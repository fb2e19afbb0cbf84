"""Cycle summary (DESIGN §13): what one Coordinator cycle claimed and admitted, in database time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ._errors import InvalidArgumentError
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
    `uncertain` counts commits whose reply was lost, however they settled afterwards;
    `clock_regressed` counts database clock regressions that abandoned the cycle (0 or 1).
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


def summarize_cycle(  # one keyword per count a cycle keeps
    owner_id: str,
    claims: Sequence[ClusterScheduleClaim],
    outcomes: Sequence[CommitOutcome],
    *,
    uncertain: int = 0,
    clock_regressed: int = 0,
    skipped: int = 0,
    serialization_retries: int = 0,
    quarantined: int = 0,
) -> CycleSummary:
    """Summarize a cycle from its claims (in claim order), its final outcomes and its counts.

    `outcomes` are the settled outcomes, so they cannot tell which commits were uncertain before
    they settled, nor a clock regression (an exception, never an outcome): the cycle passes those
    counts itself. An outcome still `UNCERTAIN` (never settled) was uncertain too.

    Raises:
        InvalidArgumentError: a count is negative, or `uncertain` is smaller than the outcomes
            left `UNCERTAIN`.

    """
    counts = {
        "uncertain": uncertain,
        "clock_regressed": clock_regressed,
        "skipped": skipped,
        "serialization_retries": serialization_retries,
        "quarantined": quarantined,
    }
    for name, value in counts.items():
        if value < 0:
            raise InvalidArgumentError(name, value, "must be >= 0")

    def count(status: CommitStatus) -> int:
        return sum(1 for outcome in outcomes if outcome.status is status)

    unsettled = count(CommitStatus.UNCERTAIN)
    if uncertain < unsettled:
        raise InvalidArgumentError(
            "uncertain", uncertain, f"must count the {unsettled} outcomes left uncertain"
        )
    return CycleSummary(
        owner_id=owner_id,
        claims=len(claims),
        admitted=sum(len(outcome.runs) for outcome in outcomes),
        committed=count(CommitStatus.COMMITTED),
        raced=count(CommitStatus.RACED),
        first_claim_acquired_at_ms=claims[0].claim_acquired_at_ms if claims else None,
        last_claim_acquired_at_ms=claims[-1].claim_acquired_at_ms if claims else None,
        **counts,
    )
