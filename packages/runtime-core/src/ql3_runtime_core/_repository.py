"""The repository protocol the Coordinator calls, and its typed outcomes (SPEC §7).

Storage backends (ql3-cluster-postgres) implement `ScheduleRepository`. Expected outcomes
(committed, raced, uncertain) are returned values; faults and fail-closed cases are exceptions:
`ClockRegressionError` when the database clock went back, `RepositoryUnavailableError` when the
store cannot be reached before anything was sent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._commit import ClaimCommit
    from ._contracts import ClaimClusterScheduleCommand, ClusterScheduleClaim

__all__ = [
    "AdmittedRun",
    "CommitBatch",
    "CommitOutcome",
    "CommitStatus",
    "ScheduleRepository",
]


class CommitStatus(StrEnum):
    """How the commit of one claim ended.

    - `COMMITTED`: the fence held; the runs, attempts, events and the new cursor are durable.
    - `RACED`: the exact claim no longer stood (expired by database time, or taken over, or the
      definition changed); nothing was written.
    - `CLOCK_REGRESSED`: the database clock read earlier than the claim's acquired time; the
      transaction was rolled back and nothing was written (fail closed).
    - `UNCERTAIN`: COMMIT was sent but its reply was lost; resolve it from durable facts.
    """

    COMMITTED = "committed"
    RACED = "raced"
    CLOCK_REGRESSED = "clock_regressed"
    UNCERTAIN = "uncertain"


_OUTCOME = ConfigDict(frozen=True, extra="forbid")


class AdmittedRun(BaseModel):
    """One admission that passed the fence: the identities allocated for it and its commit time."""

    model_config = _OUTCOME

    run_id: int
    attempt_id: int
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    claim_token: UUID


class CommitOutcome(BaseModel):
    """The result of committing one claim's decision.

    `committed_at_ms` is the commit statement's own `clock_timestamp()` sample (D5), present when
    the status is `COMMITTED`. `already_admitted` lists the decided occurrences that already had
    a run (the UNIQUE occurrence is the durable fact): the commit admitted them no second time
    and wrote nothing for them, and the rest of the decision still committed.
    """

    model_config = _OUTCOME

    schedule_id: int
    status: CommitStatus
    committed_at_ms: int | None = None
    runs: tuple[AdmittedRun, ...] = ()
    already_admitted: tuple[int, ...] = ()


class CommitBatch(BaseModel):
    """The outcomes of one commit transaction (several claims, each fenced on its own)."""

    model_config = _OUTCOME

    outcomes: tuple[CommitOutcome, ...]
    serialization_retries: int = 0


class ScheduleRepository(Protocol):
    """What the Coordinator needs from storage. Every time it uses is the store's own clock."""

    def claim_due_schedules(
        self,
        command: ClaimClusterScheduleCommand,
        limit: int,
    ) -> list[ClusterScheduleClaim]:
        """Claim up to `limit` due schedules in one statement observing the database clock once."""
        ...

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Commit several fenced decisions in one SERIALIZABLE transaction.

        Raises `ClockRegressionError` (nothing written) when the database clock went back, and
        `RepositoryUnavailableError` when nothing could be sent. A lost COMMIT reply yields
        `UNCERTAIN` outcomes instead of an exception.
        """
        ...

    def resolve_uncertain_commit(self, commit: ClaimCommit) -> CommitOutcome:
        """Settle an `UNCERTAIN` commit from durable facts; never admits an occurrence twice."""
        ...

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release the claims that still stand exactly (graceful stop); return how many."""
        ...

    def next_due_in_ms(self) -> int | None:
        """Return ms until the earliest due cursor by the database clock (0 if due), or None."""
        ...
