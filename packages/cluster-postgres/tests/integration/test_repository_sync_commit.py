"""A COMMIT acknowledged only with the sync-rep cancel WARNING is uncertain (DESIGN §6).

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
from typing import TYPE_CHECKING, Any

import pytest
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import CommitBatch, CommitStatus, RepositoryUnavailableError
from repo_helpers import command, decide, history_counts, make_schedules, wait_until
from sync_rep import drop_standby_requirement, end_sync_waits

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

RUNTIME_USER = "ql3_login_runtime"


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
            cancelled.append(end_sync_waits(primary, RUNTIME_USER, how))
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
        drop_standby_requirement(primary)
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
