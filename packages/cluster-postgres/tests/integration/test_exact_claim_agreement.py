"""`same_claim`, `same_grant` and the SQL fences agree on what the claim is (DESIGN §5).

Python-side checks ask `same_claim` whether a claim still stands on its stored row; the commit
and quarantine statements state the same six equalities in SQL, the release statement
`same_grant`'s five (every one but the version). Each case presents the real claim with one
identity field changed to PostgreSQL and checks that the statement accepts it exactly when its
Python twin says it is the claim stored on the row it names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg.rows import class_row
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimCommit,
    ClusterScheduleClaim,
    CommitStatus,
    resolve_cluster_schedule_decision,
    same_claim,
    same_grant,
    zone_rules_version,
)
from repo_helpers import command, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


@dataclass(frozen=True)
class StoredClaim:
    """The claim columns of a schedule row, read by name (an `ExactClaim`)."""

    schedule_id: int
    owner_id: str | None
    claim_token: UUID | None
    version: int
    claim_acquired_at_ms: int
    claim_expires_at_ms: int | None


_STORED = (
    "SELECT id AS schedule_id, claim_owner_id AS owner_id, claim_token, version,"
    " updated_at_ms AS claim_acquired_at_ms, claim_expires_at_ms"
    " FROM ql3.trigger_schedules WHERE id = %(schedule_id)s"
)


def _stored(db: Ql3Database, schedule_id: int) -> StoredClaim:
    with (
        psycopg.connect(db.dsn("runtime"), autocommit=True) as conn,
        conn.cursor(row_factory=class_row(StoredClaim)) as cur,
    ):
        row = cur.execute(_STORED, {"schedule_id": schedule_id}).fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class Held:
    """Three claims: `mine` and its `twin` from one claim round, `other` from a later round."""

    mine: ClusterScheduleClaim
    twin: ClusterScheduleClaim
    other: ClusterScheduleClaim


# Each case: how to change the real claim, and whether it is then still the claim its row holds
# (for the release: still the grant its row holds; only the version case differs).
_Change = Callable[[Held], dict[str, Any]]
CASES: dict[str, tuple[_Change, bool]] = {
    "unchanged": (lambda _held: {}, True),
    "owner": (lambda _held: {"owner_id": "someone-else"}, False),
    "token": (lambda _held: {"claim_token": uuid4()}, False),
    "version": (lambda held: {"version": held.mine.version + 1}, False),
    "version-back": (lambda held: {"version": held.mine.version - 1}, False),
    # Earlier, never later: a later acquired time than the commit's sample is a clock regression.
    "acquired": (lambda held: {"claim_acquired_at_ms": held.mine.claim_acquired_at_ms - 1}, False),
    "expires": (lambda held: {"claim_expires_at_ms": held.mine.claim_expires_at_ms + 1}, False),
    "schedule": (lambda held: {"schedule_id": held.other.schedule_id}, False),
    # Claimed in the same round, at the same version: all six fields equal the twin's row, so it
    # IS the twin's exact claim, and both sides say so.
    "schedule-of-a-twin": (lambda held: {"schedule_id": held.twin.schedule_id}, True),
}


def _commit(repo: PostgresScheduleRepository, claim: ClusterScheduleClaim) -> bool:
    decision = resolve_cluster_schedule_decision(claim, 256)
    # Built directly, not normalized: the claim is forged on purpose, the fence must judge it.
    batch = repo.commit_decisions(
        [ClaimCommit(claim=claim, decision=decision, zone_rules_version=zone_rules_version())]
    )
    return batch.outcomes[0].status is CommitStatus.COMMITTED


def _release(repo: PostgresScheduleRepository, claim: ClusterScheduleClaim) -> bool:
    return repo.release_claims([claim]) == 1


def _quarantine(repo: PostgresScheduleRepository, claim: ClusterScheduleClaim) -> bool:
    return len(repo.quarantine_claims([(claim, "decision failed: agreement test")])) == 1


_Fence = Callable[[PostgresScheduleRepository, ClusterScheduleClaim], bool]
_Twin = Callable[[StoredClaim, ClusterScheduleClaim], bool]
# Each fence and the Python comparison it must agree with.
FENCES: dict[str, tuple[_Fence, _Twin]] = {
    "commit": (_commit, same_claim),
    "release": (_release, same_grant),
    "quarantine": (_quarantine, same_claim),
}


def _hold(repo: PostgresScheduleRepository, db: Ql3Database) -> Held:
    make_schedules(db, 3)
    mine, twin = repo.claim_due_schedules(command("owner-a", lease_ms=30_000), 2)
    (other,) = repo.claim_due_schedules(command("owner-b", lease_ms=30_000), 1)
    assert twin.version == mine.version  # the twin case needs one version for both
    return Held(mine, twin, other)


@pytest.mark.parametrize("fence", sorted(FENCES))
@pytest.mark.parametrize("case", list(CASES))
def test_the_sql_fence_accepts_exactly_what_its_python_twin_calls_the_stored_claim(
    ql3_db: Ql3Database, case: str, fence: str
) -> None:
    """A changed claim passes the SQL fence exactly when its Python twin matches it to its row."""
    change, expected = CASES[case]
    statement, twin = FENCES[fence]
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        held = _hold(repo, ql3_db)
        presented = held.mine.model_copy(update=change(held))
        before = _stored(ql3_db, presented.schedule_id)
        python_says = twin(before, presented)
        sql_says = statement(repo, presented)
        after = _stored(ql3_db, presented.schedule_id)
    assert python_says is (expected or (fence == "release" and case.startswith("version")))
    assert sql_says is python_says
    # A refused claim wrote nothing: the row still holds the claim it held.
    assert (after == before) is not sql_says
