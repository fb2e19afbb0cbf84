"""A COMMIT acknowledged only with the sync-rep cancel WARNING is uncertain (SPEC §7, issue 14.3).

A primary with a synchronous standby; the standby is stopped, so a COMMIT waits for it; another
session cancels the wait with `pg_cancel_backend`, and PostgreSQL answers *success* with
`WARNING: canceling wait for synchronous replication due to user request`. The repository must
report the fenced claims as uncertain (never committed), and settle them only once a commit is
acknowledged cleanly: while no standby confirms, the durability barrier fails and the commit stays
uncertain; once commits no longer wait (the standby requirement is gone), it settles as committed,
exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import CommitBatch, CommitStatus, RepositoryUnavailableError
from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database
from repo_helpers import command, decide, history_counts, make_schedules, wait_until

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

WAITING_SQL = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND usename = %s"
RUNTIME_USER = "ql3_login_runtime"


@pytest.fixture
def sync_primary() -> Iterator[tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database]]:
    """Yield a primary whose commits wait for a synchronous standby, the standby, a database."""
    with ThrowawayCluster(name="ql3sync") as primary:
        standby = primary.create_standby(synchronous=True)
        name = f"ql3_sync_{uuid.uuid4().hex[:8]}"
        database = prepare_ql3_database(primary, name)
        yield primary, standby, database
        _drop_standby_requirement(primary)  # else the drop would wait for the stopped standby
        drop_database(primary, name)


def _end_sync_waits(primary: ThrowawayCluster, how: str) -> int:
    """End every runtime session's wait for the standby with `how`; return how many."""
    ending = {
        "pg_cancel_backend": "SELECT pg_cancel_backend(%s)",
        "pg_terminate_backend": "SELECT pg_terminate_backend(%s)",
    }[how]
    with primary.connect() as conn:
        pids = [row[0] for row in conn.execute(WAITING_SQL, (RUNTIME_USER,)).fetchall()]
        for pid in pids:
            conn.execute(ending, (pid,))
    return len(pids)


def _drop_standby_requirement(primary: ThrowawayCluster) -> None:
    with primary.connect() as conn:
        conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        conn.execute("SELECT pg_reload_conf()")


@pytest.mark.parametrize("how", ["pg_cancel_backend", "pg_terminate_backend"])
def test_commit_whose_sync_wait_is_ended_is_uncertain_then_settled_once(
    sync_primary: tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database], how: str
) -> None:
    """A cancelled or terminated sync wait: UNCERTAIN, not settled until durable, then once."""
    primary, standby, database = sync_primary
    make_schedules(database, 1)
    dsn = database.dsn("runtime")
    with PostgresScheduleRepository(dsn, durability_timeout_ms=300) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        standby.stop()  # from now on every commit on the primary waits for ever
        result: list[CommitBatch] = []
        worker = threading.Thread(target=lambda: result.append(repo.commit_decisions([commit])))
        worker.start()
        cancelled: list[int] = []

        def waits_cancelled() -> bool:
            cancelled.append(_end_sync_waits(primary, how))
            return cancelled[-1] > 0

        wait_until(waits_cancelled, what="the COMMIT waits for the standby")
        worker.join(30)
        assert not worker.is_alive()
        (batch,) = result
        assert [o.status for o in batch.outcomes] == [CommitStatus.UNCERTAIN]
        assert batch.outcomes[0].runs == ()
        # The rows exist on the primary only; no standby confirms them: not settled.
        with pytest.raises(RepositoryUnavailableError, match="durability barrier"):
            repo.resolve_uncertain_commit(commit)
        _drop_standby_requirement(primary)
        resolved = _settle(repo, commit)
    assert resolved.status is CommitStatus.COMMITTED
    occurrences = len(commit.decision.occurrences)
    assert [run.scheduled_for_ms for run in resolved.runs] == list(commit.decision.occurrences)
    assert history_counts(database) == (occurrences, occurrences, 2 * occurrences)


def _settle(repo: PostgresScheduleRepository, commit: Any) -> Any:
    """Retry the resolution until the reload lets the barrier pass (monotonic deadline)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return repo.resolve_uncertain_commit(commit)
        except RepositoryUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
