"""Reading an uncertain commit's fate from durable facts (SPEC §7), without writing anything.

A commit whose COMMIT reply was lost either landed completely or not at all. These helpers look
at what it would have left behind: the runs its claim token admitted (the first admitted
occurrence is the witness, UNIQUE makes it unambiguous), or for a decision admitting nothing,
the schedule row moved exactly as that commit moves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import AdmittedRun, CommitOutcome, CommitStatus

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ClaimCommit

__all__ = ["committed_outcome", "decision_landed"]


def committed_outcome(commit: ClaimCommit, rows: Sequence[tuple[Any, ...]]) -> CommitOutcome | None:
    """Rebuild the COMMITTED outcome from `find_committed_runs` rows, or None if it never landed."""
    claim = commit.claim
    mine = [row for row in rows if row[7] == claim.claim_token and row[6] == claim.owner_id]
    first = commit.decision.occurrences[0]
    if not any(row[4] == first for row in mine):
        return None
    runs = tuple(
        AdmittedRun(
            run_id=row[0],
            attempt_id=row[1],
            schedule_id=row[2],
            task_id=row[3],
            scheduled_for_ms=row[4],
            created_at_ms=row[5],
            owner_id=row[6],
            claim_token=row[7],
        )
        for row in mine
    )
    return CommitOutcome(
        schedule_id=claim.schedule_id,
        status=CommitStatus.COMMITTED,
        committed_at_ms=runs[0].created_at_ms,
        runs=runs,
    )


def decision_landed(commit: ClaimCommit, row: tuple[Any, ...] | None) -> CommitOutcome | None:
    """Tell whether the schedule row moved exactly as a commit admitting nothing moves it.

    The commit clears the claim, bumps the version by one and writes the decided cursor and state
    at a time no earlier than the acquired time. Anything else means it did not land (or the row
    moved on since, in which case there is nothing left to do for this claim either).
    """
    if row is None:
        return None
    state, next_due, owner, _, _, version, updated = row
    claim, decision = commit.claim, commit.decision
    landed = (
        owner is None
        and version == claim.version + 1
        and next_due == decision.next_due_at_ms
        and state == decision.state.value
        and updated >= claim.claim_acquired_at_ms
    )
    if not landed:
        return None
    return CommitOutcome(
        schedule_id=claim.schedule_id, status=CommitStatus.COMMITTED, committed_at_ms=updated
    )
