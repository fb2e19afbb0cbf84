"""What one Coordinator cycle carries and decides, apart from talking to storage (DESIGN §13, §4).

The cycle's result and its running state, the refusal of overlapping cycles, and the two pure
steps of a claim round: deciding each claim within the remaining budget, and sizing the next
round. Nothing here reads a clock or the repository; `_coordinator` drives them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from ql3_runtime_core import (
    AdmittedRun,
    ClaimCommit,
    ClusterScheduleClaim,
    CommitOutcome,
    CycleSummary,
    QL3Error,
    QuarantinedSchedule,
    ZoneRules,
    ZoneRulesCheck,
    checked_commit,
    log_event,
    quarantine_reason,
    resolve_cluster_schedule_decision,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "AdmissionCallback",
    "CycleOverlapError",
    "CycleResult",
    "CycleState",
    "decide_claims",
    "next_round_size",
]

logger = logging.getLogger(__name__)

AdmissionCallback: TypeAlias = Callable[[AdmittedRun], None]


class CycleOverlapError(QL3Error, RuntimeError):
    """Raised when a cycle is started while another cycle of the same Coordinator still runs."""

    __module__ = "ql3_cluster_control"


@dataclass(frozen=True)
class CycleResult:
    """What one cycle did.

    `work_remaining` is True when the budget was spent (more may be due: start the next cycle
    at once); `abandoned` when a clock regression made the cycle give up its claims to expiry.
    `quarantined` lists the schedules this cycle put in state `invalid`; `zone_rules` is what
    the last claim statement saw (None when no claim ran), claims being refused while they
    disagree.
    """

    summary: CycleSummary
    admitted: tuple[AdmittedRun, ...]
    work_remaining: bool
    abandoned: bool
    duration_s: float
    quarantined: tuple[QuarantinedSchedule, ...] = ()
    zone_rules: ZoneRulesCheck | None = None


@dataclass
class CycleState:
    """What one cycle did so far; its summary is built once from it when the cycle ends."""

    remaining: int
    claims: list[ClusterScheduleClaim] = field(default_factory=list)
    outcomes: list[CommitOutcome] = field(default_factory=list)
    admitted: list[AdmittedRun] = field(default_factory=list)
    skipped: int = 0
    serialization_retries: int = 0
    uncertain: int = 0
    clock_regressed: int = 0
    quarantined: list[QuarantinedSchedule] = field(default_factory=list)
    zone_rules: ZoneRulesCheck | None = None


def decide_claims(
    claims: Sequence[ClusterScheduleClaim], state: CycleState, rules: ZoneRules | None
) -> tuple[list[ClaimCommit], list[tuple[ClusterScheduleClaim, str]], int]:
    """Decide each claim from its own acquired time (DESIGN §4) within the remaining budget.

    `rules` are the zone rules the claim round carries (the recorded ones).

    Returns the commits, the claims whose decision or normalization raised (with the
    reason), and how many claims found the budget already spent (they decide nothing). The
    decision is a pure function of the claim, so whatever it raises is about that schedule's
    data: it is quarantined, never allowed to end the loop (DESIGN §8).
    """
    commits: list[ClaimCommit] = []
    failures: list[tuple[ClusterScheduleClaim, str]] = []
    starved = 0
    for claim in claims:
        starved += state.remaining == 0
        try:
            decision = resolve_cluster_schedule_decision(claim, state.remaining, rules=rules)
            commit = checked_commit(claim, decision, state.remaining, rules=rules)
        except Exception as exc:  # noqa: BLE001  # any exception: see the docstring
            if not isinstance(exc, QL3Error | ValueError):
                # Not a typed refusal: a bug somewhere, so its traceback is worth keeping.
                log_event(
                    logger,
                    logging.DEBUG,
                    "decision.raised",
                    schedule_id=claim.schedule_id,
                    exc_info=exc,
                )
            failures.append((claim, quarantine_reason(exc, "decision failed: ")))
            continue
        commits.append(commit)
        state.remaining -= len(decision.occurrences)
        state.skipped += decision.skipped
    return commits, failures, starved


def next_round_size(
    current: int, claim_batch: int, *, served: int, starved: int, remaining: int
) -> int:
    """How many schedules the next round claims: the batch, unless backlogs starve claims.

    In the steady state each claim admits one occurrence and a round claims the whole batch.
    When schedules carry backlogs (catch-up), the first claims of a round spend the cycle
    budget and the rest decide nothing: each of those costs two row writes (claim, release)
    for no admission, up to `claim_batch - 1` per cycle. So after a round that starved
    claims, the next rounds (this cycle's and the next ones') ask only for as many schedules
    as it served; a round that spent the budget without starving any keeps its size; a round
    that left budget over restores the full batch.
    """
    if starved:
        return max(1, served)
    return current if remaining == 0 else claim_batch
