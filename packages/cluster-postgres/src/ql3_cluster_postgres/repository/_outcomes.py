"""Commit outcomes: built from the commit statement's row, or from durable facts (DESIGN §5, §6).

`committed_batch` / `uncertain_batch` turn the one row the commit statement returns into typed
outcomes. A commit whose COMMIT reply was lost either landed completely or not at all; the other
helpers look at what it would have left behind, without writing anything: the runs its claim
token admitted (any one of them is the witness, UNIQUE makes it unambiguous), or, for a decision
admitting nothing (or only occurrences that already had a run), the schedule row moved exactly
as that commit moves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID  # noqa: TC003  # psycopg's class_row builds StoredSchedule at run time

from ql3_runtime_core import AdmittedRun, CommitBatch, CommitOutcome, CommitStatus, same_claim

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ClaimCommit, ClusterScheduleClaim

    from ql3_cluster_postgres._rows import CommitRow, FoundRun

__all__ = [
    "StoredSchedule",
    "claim_stands",
    "committed_batch",
    "committed_outcome",
    "decision_landed",
    "uncertain_batch",
]


@dataclass(frozen=True)
class StoredSchedule:
    """The fencing columns of one schedule row as stored now (`read_schedule_row`, by name).

    Shaped as a `ql3_runtime_core.ExactClaim`, so `same_claim` compares it with a claim: the claim
    columns are None when nobody holds the row, and the row's `updated_at_ms` is the acquired
    time of the claim that stamped it (DESIGN §3).
    """

    schedule_id: int
    state: str
    next_due_at_ms: int | None
    owner_id: str | None
    claim_token: UUID | None
    claim_expires_at_ms: int | None
    version: int
    updated_at_ms: int

    @property
    def claim_acquired_at_ms(self) -> int:
        """The claim statement writes its observation as `updated_at_ms`; nothing else does."""
        return self.updated_at_ms


def committed_outcome(
    commit: ClaimCommit, rows: Sequence[FoundRun], state: StoredSchedule | None
) -> CommitOutcome | None:
    """Rebuild the COMMITTED outcome from `find_committed_runs` rows, or None if it never landed.

    The commit is atomic, so one run of this claim among the decided occurrences proves it
    landed. Without one, every decided occurrence may already have had a run (then the commit
    wrote none): the schedule row, moved exactly as this commit moves it, is the witness.
    """
    claim = commit.claim
    mine = [
        row
        for row in rows
        if row.claim_token == claim.claim_token and row.owner_id == claim.owner_id
    ]
    if mine:
        committed_at = mine[0].created_at_ms
    else:
        admitted_before = {row.scheduled_for_ms for row in rows}
        landed = decision_landed(commit, state)
        if landed is None or not set(commit.decision.occurrences) <= admitted_before:
            return None
        committed_at = int(landed.committed_at_ms or claim.claim_acquired_at_ms)
    runs = tuple(_admitted_run(row) for row in mine)
    written = {run.scheduled_for_ms for run in runs}
    return CommitOutcome(
        schedule_id=claim.schedule_id,
        status=CommitStatus.COMMITTED,
        committed_at_ms=committed_at,
        runs=runs,
        already_admitted=tuple(t for t in commit.decision.occurrences if t not in written),
    )


def _admitted_run(row: FoundRun) -> AdmittedRun:
    """Return a run this claim admitted; the commit writes each run with its first attempt."""
    if row.attempt_id is None:  # pragma: no cover - a run and its attempt are one INSERT chain
        msg = f"run {row.run_id}: admitted by this claim, yet it has no first attempt"
        raise RuntimeError(msg)
    return AdmittedRun(
        run_id=row.run_id,
        attempt_id=row.attempt_id,
        schedule_id=row.schedule_id,
        task_id=row.task_id,
        scheduled_for_ms=row.scheduled_for_ms,
        created_at_ms=row.created_at_ms,
        owner_id=row.owner_id,
        claim_token=row.claim_token,
    )


def decision_landed(commit: ClaimCommit, row: StoredSchedule | None) -> CommitOutcome | None:
    """Tell whether the schedule row moved exactly as a commit admitting nothing moves it.

    The commit clears the claim, bumps the version by one and writes the decided cursor and state
    at a time no earlier than the acquired time. Anything else means it did not land (or the row
    moved on since, in which case there is nothing left to do for this claim either).
    """
    if row is None:
        return None
    claim, decision = commit.claim, commit.decision
    # The commit clears the claim and bumps the version by exactly one; any other version means
    # someone else wrote the row after (or instead of) this commit.
    landed = (
        row.owner_id is None
        and row.version == claim.version + 1
        and row.next_due_at_ms == decision.next_due_at_ms
        and row.state == decision.state.value
        and row.updated_at_ms >= claim.claim_acquired_at_ms
    )
    if not landed:
        return None
    return CommitOutcome(
        schedule_id=claim.schedule_id,
        status=CommitStatus.COMMITTED,
        committed_at_ms=row.updated_at_ms,
    )


def claim_stands(claim: ClusterScheduleClaim, row: StoredSchedule) -> bool:
    """Tell whether the exact claim (DESIGN §5) still stands on the stored row: `same_claim` only.

    Expiry is not judged here: a claim past its lease that nobody took over still stands, and
    the fenced commit it leads to decides by the database clock (raced).
    """
    return same_claim(claim, row)


def committed_batch(commits: Sequence[ClaimCommit], row: CommitRow, retries: int) -> CommitBatch:
    """Build the outcomes of a committed batch from the commit statement's row."""
    observed = row.observed_at_ms
    fenced = set(row.fenced_schedule_ids)
    runs: dict[int, list[AdmittedRun]] = {}
    owners = {commit.claim.schedule_id: commit.claim for commit in commits}
    if row.run_ids != row.attempt_run_ids:  # pragma: no cover - one attempt per run, same order
        msg = (
            f"commit: runs {row.run_ids} and attempts of runs {row.attempt_run_ids} do not pair up"
        )
        raise RuntimeError(msg)
    for run_id, attempt_id, schedule_id, task_id, scheduled_for in zip(
        row.run_ids,
        row.attempt_ids,
        row.run_schedule_ids,
        row.run_task_ids,
        row.run_scheduled_for_ms,
        strict=True,
    ):
        claim = owners[schedule_id]
        # The validating constructor, not `model_construct`: pydantic's validation runs in its
        # compiled core, while `model_construct` walks the fields in Python and cost about twice
        # as much per run (pydantic 2.14, measured); a catch-up commit builds up to 256 of them.
        runs.setdefault(schedule_id, []).append(
            AdmittedRun(
                run_id=run_id,
                attempt_id=attempt_id,
                schedule_id=schedule_id,
                task_id=task_id,
                scheduled_for_ms=scheduled_for,
                created_at_ms=observed,
                owner_id=claim.owner_id,
                claim_token=claim.claim_token,
            )
        )
    outcomes = tuple(
        _fenced_outcome(commit, observed, tuple(runs.get(commit.claim.schedule_id, ())))
        if commit.claim.schedule_id in fenced
        else CommitOutcome(schedule_id=commit.claim.schedule_id, status=CommitStatus.RACED)
        for commit in commits
    )
    return CommitBatch(outcomes=outcomes, serialization_retries=retries)


def _fenced_outcome(
    commit: ClaimCommit, observed: int, runs: tuple[AdmittedRun, ...]
) -> CommitOutcome:
    """Build COMMITTED with the runs written; decided occurrences without one already had one."""
    occurrences = commit.decision.occurrences
    already: tuple[int, ...] = ()
    # The decided occurrences are distinct (the commit check) and each run is one of them, so as
    # many runs as occurrences means none had a run already: the usual case needs no set.
    if len(runs) != len(occurrences):
        written = {run.scheduled_for_ms for run in runs}
        already = tuple(t for t in occurrences if t not in written)
    return CommitOutcome(
        schedule_id=commit.claim.schedule_id,
        status=CommitStatus.COMMITTED,
        committed_at_ms=observed,
        runs=runs,
        already_admitted=already,
    )


def uncertain_batch(commits: Sequence[ClaimCommit], fenced: set[int], retries: int) -> CommitBatch:
    """Report the fenced claims of a batch whose COMMIT reply was lost as uncertain."""
    outcomes = tuple(
        CommitOutcome(
            schedule_id=commit.claim.schedule_id,
            status=CommitStatus.UNCERTAIN
            if commit.claim.schedule_id in fenced
            else CommitStatus.RACED,
        )
        for commit in commits
    )
    return CommitBatch(outcomes=outcomes, serialization_retries=retries)
