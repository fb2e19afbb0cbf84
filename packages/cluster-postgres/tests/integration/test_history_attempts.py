"""HistoryReader's views of execution (DESIGN §10): attempts by state and recent runs, DB time.

The database clock is frozen, so the oldest queued age and the ready/waiting split are exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

from ingress_helpers import LEASE_MS, admit, take
from ql3_cluster_postgres import HistoryReader, WorkerIngress
from ql3_runtime_core import AttemptOutcome, AttemptResult, AttemptState, TaskExecution
from repo_helpers import db_now_ms

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

# Its retry still waits when the lease of a hanging attempt has expired.
SLOW_RETRY = TaskExecution(command="true", max_attempts=2, retry_backoff_ms=4 * LEASE_MS)


def test_attempt_counts_and_recent_runs_by_the_database_clock(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Each state is counted; queued ages and backoff waits are measured on the database clock."""
    run_ids = admit(faketime_db, 4, execution=SLOW_RETRY)
    start = db_now_ms(faketime_db.dsn("admin")) + 60_000
    faketime_cluster.freeze_clock_at_ms(start)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        ok, failing, hanging = take(ingress, token, limit=3)
        ingress.finish_attempt(
            ok.attempt_id, token, AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)
        )
        ingress.finish_attempt(
            failing.attempt_id,
            token,
            AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=2, output_tail="no\n"),
        )
    faketime_cluster.freeze_clock_at_ms(start + LEASE_MS)
    with HistoryReader(faketime_db.dsn("admin")) as reader:
        counts = reader.attempt_counts()
        newest_first = reader.recent_runs()
        failed_runs = reader.recent_runs(state=AttemptState.QUEUED, schedule="s00001")
        one = reader.recent_runs(limit=1)
    assert counts.database_now_ms == start + LEASE_MS
    # The fourth run's first attempt waits since its admission; the retry waits for its backoff.
    admitted = min(a.created_at_ms for a in newest_first[0].attempts)
    assert (counts.queued_ready, counts.queued_waiting, counts.queued) == (1, 1, 2)
    assert counts.oldest_queued_age_ms == start + LEASE_MS - admitted
    assert (counts.running, counts.running_lease_expired) == (1, 1)
    assert (counts.succeeded, counts.failed, counts.timed_out, counts.abandoned) == (1, 1, 0, 0)
    assert [run.run_id for run in newest_first] == sorted(run_ids, reverse=True)
    by_run = {run.run_id: run for run in newest_first}
    assert by_run[ok.run_id].state is AttemptState.SUCCEEDED
    assert by_run[hanging.run_id].attempts[0].lease_expires_at_ms == start + LEASE_MS
    (retried,) = failed_runs
    assert retried.run_id == failing.run_id
    assert [(a.attempt_number, a.state, a.exit_code) for a in retried.attempts] == [
        (1, AttemptState.FAILED, 2),
        (2, AttemptState.QUEUED, None),
    ]
    assert retried.attempts[0].output_tail == "no\n"
    assert retried.attempts[1].eligible_at_ms == start + SLOW_RETRY.retry_backoff_ms
    assert [run.run_id for run in one] == [max(run_ids)]
