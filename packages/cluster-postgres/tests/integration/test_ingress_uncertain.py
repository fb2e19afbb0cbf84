"""Worker writes whose answer is lost, only locally acknowledged, or never comes, are settled.

The wire fault proxy swallows the reply that says a worker write committed (a take's COMMIT, a
finish's one autocommit statement) after the server committed it, and resets the connection; a
primary whose synchronous standby is stopped acknowledges a cancelled commit with a WARNING
only; a partitioned proxy never answers. A take whose answer was lost must not burn the attempt
(a run allowed one attempt still runs), a take kept only by a primary that cannot make it
durable must not run, a finish whose answer was lost is confirmed from durable facts, and no
call waits for ever.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from ingress_helpers import admit, attempts_of, events_of, rows, take
from ql3_cluster_postgres import WorkerIngress, verify_history
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    RepositoryUnavailableError,
    TaskExecution,
)
from ql3_testkit import WireFaultProxy
from repo_helpers import owner_conn, wait_until
from sync_helpers import cancel_sync_waits, drop_standby_requirement, retry_until, sync_primary

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ql3_testkit import Ql3Database, ThrowawayCluster

# Allowed one attempt: a burned attempt would leave the run never executed.
ONCE = TaskExecution(command="true", max_attempts=1, timeout_ms=60_000, retry_backoff_ms=0)
SUCCEEDED = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)
WORKER_USER = "ql3_login_worker_ingress"


@pytest.fixture
def proxy(pg_cluster: ThrowawayCluster) -> Iterator[WireFaultProxy]:
    """Yield a wire fault proxy in front of the session's cluster."""
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as started:
        yield started


def _through(db: Ql3Database, proxy: WireFaultProxy) -> str:
    return db.dsn("worker_ingress", port=str(proxy.port))


def test_a_take_whose_answer_is_lost_burns_no_attempt(
    ql3_db: Ql3Database, proxy: WireFaultProxy
) -> None:
    """The take landed unseen; settling hands it back unused and the run still executes once."""
    (run_id,) = admit(ql3_db, execution=ONCE)
    token = uuid4()
    with WorkerIngress(_through(ql3_db, proxy)) as ingress:
        # The take is sent in a transaction of its own: the reply to its COMMIT is lost.
        proxy.drop_next_commit_reply()
        with pytest.raises(RepositoryUnavailableError, match="uncertain"):
            take(ingress, token)
        assert proxy.commit_replies_dropped == 1
        (held,) = attempts_of(ql3_db, run_id)
        assert (held["state"], held["lease_token"]) == ("running", token)
        # What the worker runs is kept; what it never learned of is handed back.
        assert ingress.settle_taken_attempts("worker-a", token, [held["id"]]) == []
        assert ingress.settle_taken_attempts("worker-a", token, []) == [held["id"]]
        (again,) = take(ingress, token)
        finished = ingress.finish_attempt(again.attempt_id, token, SUCCEEDED)
    assert (again.attempt_id, again.attempt_number, finished.recorded) == (held["id"], 1, True)
    assert [e["kind"] for e in events_of(ql3_db, run_id)] == [
        "attempt.queued",
        "attempt.running",
        "attempt.released",
        "attempt.running",
        "attempt.succeeded",
    ]
    assert verify_history(ql3_db.dsn("admin")).ok


def test_a_finish_whose_answer_is_lost_is_found_recorded_by_its_worker(
    ql3_db: Ql3Database, proxy: WireFaultProxy
) -> None:
    """Retried with settle, the finish finds its own record; another lease would not."""
    (run_id,) = admit(ql3_db, execution=ONCE)
    token = uuid4()
    with WorkerIngress(_through(ql3_db, proxy)) as ingress:
        (attempt,) = take(ingress, token)
        # The finish is one autocommit statement: it commits before its reply, which is lost.
        proxy.drop_next_reply_to("-- ql3: finish_attempt")
        with pytest.raises(RepositoryUnavailableError, match="uncertain"):
            ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED)
        again = ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED, settle=True)
        stranger = ingress.finish_attempt(attempt.attempt_id, uuid4(), SUCCEEDED, settle=True)
    assert (again.recorded, again.state_found, again.ended_by_this_lease) == (
        False,
        AttemptState.SUCCEEDED,
        True,
    )
    assert (stranger.recorded, stranger.ended_by_this_lease) == (False, False)
    assert [a["state"] for a in attempts_of(ql3_db, run_id)] == ["succeeded"]


def _started(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start `call` on a thread; the thread, and the list that gets what it returned or raised."""
    ended: list[object] = []

    def run() -> None:
        try:
            ended.append(call())
        except BaseException as exc:  # noqa: BLE001  # handed to the test to judge
            ended.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, ended


def test_a_silent_server_cannot_hold_a_call(ql3_db: Ql3Database, proxy: WireFaultProxy) -> None:
    """Bytes stop flowing mid-call (no reset): the client cuts the call at its deadline."""
    (run_id,) = admit(ql3_db, execution=ONCE)
    token = uuid4()
    with WorkerIngress(_through(ql3_db, proxy), statement_timeout_ms=1_000) as ingress:
        (attempt,) = take(ingress, token)
        with owner_conn(ql3_db) as holder, holder.transaction():
            # The renewal waits for this row lock; the server ends it after its statement
            # timeout, and that answer is held by the partition like every other byte.
            locked = "SELECT id FROM ql3.attempts WHERE id = %s FOR UPDATE"
            holder.execute(locked, (attempt.attempt_id,))
            renewal, ended = _started(
                lambda: ingress.renew_leases(token, [attempt.attempt_id], 30_000)
            )
            wait_until(lambda: _waits_for_a_lock(ql3_db), what="the renewal waits for the lock")
            proxy.partition()
            try:
                renewal.join(30)  # a stop for a hung test, not a measurement
                assert not renewal.is_alive(), "the call still waits for the silent server"
            finally:
                proxy.heal()
    (error,) = ended
    assert isinstance(error, RepositoryUnavailableError), error
    assert "no answer within 2 s; the client cut the connection" in str(error)
    assert [a["state"] for a in attempts_of(ql3_db, run_id)] == ["running"]


def _waits_for_a_lock(db: Ql3Database) -> bool:
    found = rows(
        db.superuser_dsn,
        "SELECT count(*) AS waiting FROM pg_stat_activity"
        " WHERE usename = %s AND wait_event_type = 'Lock'",
        (WORKER_USER,),
    )
    return bool(found[0]["waiting"])


def test_a_take_kept_only_by_the_primary_is_not_run_until_durable() -> None:
    """A take acknowledged with the sync-rep WARNING is uncertain; it settles once durable."""
    with sync_primary("ql3wtake") as (primary, standby, db):
        (run_id,) = admit(db, execution=ONCE)
        token = uuid4()
        with WorkerIngress(db.dsn("worker_ingress"), durability_timeout_ms=300) as ingress:
            standby.stop()  # from now on every commit on the primary waits for ever
            ended = _in_background(lambda: take(ingress, token), primary)
            assert isinstance(ended, RepositoryUnavailableError), ended
            assert "acknowledged only with a WARNING" in str(ended)
            # The rows are on this primary only: nothing may run them yet.
            with pytest.raises(RepositoryUnavailableError, match="durability barrier"):
                ingress.settle_taken_attempts("worker-a", token, [])
            drop_standby_requirement(primary)
            released = retry_until(
                lambda: ingress.settle_taken_attempts("worker-a", token, []),
                RepositoryUnavailableError,
            )
            (again,) = take(ingress, token)
        assert released == [again.attempt_id]
        assert [a["attempt_number"] for a in attempts_of(db, run_id)] == [1]


def test_a_finish_kept_only_by_the_primary_is_confirmed_once_durable() -> None:
    """A finish acknowledged with the WARNING is settled (found recorded) once it is durable."""
    with sync_primary("ql3wfinish") as (primary, standby, db):
        (run_id,) = admit(db, execution=ONCE)
        token = uuid4()
        with WorkerIngress(db.dsn("worker_ingress"), durability_timeout_ms=300) as ingress:
            (attempt,) = take(ingress, token)
            standby.stop()
            ended = _in_background(
                lambda: ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED), primary
            )
            assert isinstance(ended, RepositoryUnavailableError), ended
            with pytest.raises(RepositoryUnavailableError, match="durability barrier"):
                ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED, settle=True)
            drop_standby_requirement(primary)
            settled = retry_until(
                lambda: ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED, settle=True),
                RepositoryUnavailableError,
            )
        assert (settled.recorded, settled.state_found, settled.ended_by_this_lease) == (
            False,
            AttemptState.SUCCEEDED,
            True,
        )
        assert [a["state"] for a in attempts_of(db, run_id)] == ["succeeded"]


def _in_background(call: Callable[[], object], primary: ThrowawayCluster) -> object:
    """Run `call` while its COMMIT waits for the stopped standby; cancel that wait; its end."""
    thread, ended = _started(call)
    wait_until(lambda: cancel_sync_waits(primary, WORKER_USER) > 0, what="a COMMIT waits")
    thread.join(30)  # a stop for a hung test, not a measurement
    (result,) = ended
    return result
