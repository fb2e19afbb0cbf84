"""Leases, expiry and retry backoff are decided by the database clock (DESIGN §10, rule zero).

PostgreSQL runs under libfaketime; each test freezes its clock at exact instants around a lease's
expiry or a retry's not-before time and proves from the rows what each statement decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

from ingress_helpers import LEASE_MS, SHELL, admit, attempts_of, events_of, take
from ql3_cluster_postgres import WorkerIngress
from ql3_runtime_core import (
    ATTEMPT_KILL_MARGIN_MS,
    ATTEMPT_SUCCESSOR_GRACE_MS,
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    TaskExecution,
)
from repo_helpers import db_now_ms, fetch

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

BACKOFF_MS = SHELL.retry_backoff_ms
FAILED = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=3, output_tail="boom\n")


def _frozen_start(db: Ql3Database, cluster: ThrowawayCluster) -> int:
    """Freeze the database clock a minute ahead of itself (past every admission); that instant."""
    start = db_now_ms(db.dsn("worker_ingress")) + 60_000
    cluster.freeze_clock_at_ms(start)
    return start


def test_a_heartbeat_renews_only_the_attempts_it_names_and_dates_them(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Of two attempts held under one token, a renewal of one leaves the other's lease alone.

    Each write of an attempt dates the row at the database time it was made: the take at its
    start, the renewal at the renewal's instant.
    """
    admit(faketime_db, 2)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        first, second = sorted(take(ingress, token), key=lambda attempt: attempt.attempt_id)
        taken = {
            row["id"]: row for a in (first, second) for row in attempts_of(faketime_db, a.run_id)
        }
        assert [taken[a.attempt_id]["updated_at_ms"] for a in (first, second)] == [start, start]
        faketime_cluster.freeze_clock_at_ms(start + 2_000)
        renewed = ingress.renew_leases(token, [first.attempt_id], LEASE_MS)
    assert renewed == {first.attempt_id: start + 2_000 + LEASE_MS}
    rows = {row["id"]: row for a in (first, second) for row in attempts_of(faketime_db, a.run_id)}
    assert (
        rows[first.attempt_id]["lease_expires_at_ms"],
        rows[first.attempt_id]["updated_at_ms"],
    ) == (
        start + 2_000 + LEASE_MS,
        start + 2_000,
    )
    assert rows[second.attempt_id] == taken[second.attempt_id]


def test_a_finish_dates_the_row_at_its_own_instant(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A finish records its end and dates the row at the database time it was made.

    `updated_at_ms` is what every later write of the row is ordered after (`greatest(...)`), so
    a finish that left it at the take's instant would let a later write date itself earlier
    than the attempt's end.
    """
    admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    done = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0, output_tail="")
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        faketime_cluster.freeze_clock_at_ms(start + 1_500)
        finished = ingress.finish_attempt(attempt.attempt_id, token, done)
    assert finished.recorded
    (row,) = attempts_of(faketime_db, attempt.run_id)
    assert (row["started_at_ms"], row["finished_at_ms"], row["updated_at_ms"]) == (
        start,
        start + 1_500,
        start + 1_500,
    )


def test_lease_and_heartbeat_follow_the_database_clock(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A take leases until DB now + lease; a heartbeat extends from DB now; expiry ends it."""
    admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        assert (attempt.taken_at_ms, attempt.lease_expires_at_ms) == (start, start + LEASE_MS)
        faketime_cluster.freeze_clock_at_ms(start + 3_000)
        renewed = ingress.renew_leases(token, [attempt.attempt_id], LEASE_MS)
        assert renewed == {attempt.attempt_id: start + 3_000 + LEASE_MS}
        assert ingress.renew_leases(uuid4(), [attempt.attempt_id], LEASE_MS) == {}
        # One millisecond before the expiry nobody may abandon it; at the expiry it is over.
        faketime_cluster.freeze_clock_at_ms(start + 3_000 + LEASE_MS - 1)
        assert ingress.abandon_expired_attempts(10) == []
        faketime_cluster.freeze_clock_at_ms(start + 3_000 + LEASE_MS)
        assert ingress.renew_leases(token, [attempt.attempt_id], LEASE_MS) == {}
        (running,) = attempts_of(faketime_db, attempt.run_id)
        assert running["state"] == "running"


def test_failure_queues_the_next_attempt_after_the_backoff(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A failure and its successor (not before DB end + backoff) are written by one statement."""
    (run_id,) = admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (first,) = take(ingress, token)
        faketime_cluster.freeze_clock_at_ms(start + 1_000)
        failed = ingress.finish_attempt(first.attempt_id, token, FAILED)
        assert failed.recorded
        assert (failed.finished_at_ms, failed.next_not_before_ms) == (
            start + 1_000,
            start + 1_000 + BACKOFF_MS,
        )
        faketime_cluster.freeze_clock_at_ms(start + 1_000 + BACKOFF_MS - 1)
        assert take(ingress, token) == []
        faketime_cluster.freeze_clock_at_ms(start + 1_000 + BACKOFF_MS)
        (second,) = take(ingress, token)
        last = ingress.finish_attempt(second.attempt_id, token, FAILED)
    assert (second.attempt_id, second.attempt_number) == (failed.next_attempt_id, 2)
    assert second.queue_delay_ms == 0
    assert last.recorded
    assert last.next_attempt_id is None  # max_attempts is 2: the run has used its attempts
    states = [
        (a["attempt_number"], a["state"], a["exit_code"]) for a in attempts_of(faketime_db, run_id)
    ]
    assert states == [(1, "failed", 3), (2, "failed", 3)]
    events = [(e["kind"], e["created_at_ms"], e["payload"]) for e in events_of(faketime_db, run_id)]
    end = start + 1_000
    assert events[2:] == [
        ("attempt.failed", end, {"worker_id": "worker-a", "exit_code": 3, "retried": True}),
        (
            "attempt.queued",
            end,
            {
                "not_before_ms": end + BACKOFF_MS,
                "after_attempt_id": first.attempt_id,
                "after": "failed",
            },
        ),
        (
            "attempt.running",
            end + BACKOFF_MS,
            {"worker_id": "worker-a", "lease_expires_at_ms": end + BACKOFF_MS + LEASE_MS},
        ),
        (
            "attempt.failed",
            end + BACKOFF_MS,
            {"worker_id": "worker-a", "exit_code": 3, "retried": False},
        ),
    ]


def test_timed_out_is_recorded_with_the_kill_signal_and_retried(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A timed-out attempt keeps its exit code (the signal) and gets a successor like a failure."""
    (run_id,) = admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    killed = AttemptResult(outcome=AttemptOutcome.TIMED_OUT, exit_code=-15, output_tail="slow")
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        finished = ingress.finish_attempt(attempt.attempt_id, token, killed)
    assert finished.next_not_before_ms == start + BACKOFF_MS
    first, second = attempts_of(faketime_db, run_id)
    assert (first["state"], first["exit_code"], first["finished_at_ms"]) == (
        "timed_out",
        -15,
        start,
    )
    assert (second["state"], second["not_before_ms"]) == ("queued", start + BACKOFF_MS)


def test_an_expired_lease_is_abandoned_and_its_run_retried(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """At the DB expiry another worker abandons the attempt and queues the next in one statement."""
    (run_id,) = admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    dead, alive = uuid4(), uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, dead, worker_id="dead-worker")
        expiry = start + LEASE_MS
        faketime_cluster.freeze_clock_at_ms(expiry)
        (abandoned,) = ingress.abandon_expired_attempts(10)
        assert ingress.abandon_expired_attempts(10) == []
        late = ingress.finish_attempt(attempt.attempt_id, dead, FAILED)
        faketime_cluster.freeze_clock_at_ms(expiry + BACKOFF_MS)
        (retry,) = take(ingress, alive, worker_id="live-worker")
    assert abandoned.worker_id == "dead-worker"
    assert (abandoned.lease_expired_at_ms, abandoned.abandoned_at_ms) == (expiry, expiry)
    assert abandoned.next_not_before_ms == expiry + BACKOFF_MS
    assert (late.recorded, late.state_found) == (False, AttemptState.ABANDONED)
    assert (retry.attempt_id, retry.attempt_number) == (abandoned.next_attempt_id, 2)
    kinds = [(e["kind"], e["created_at_ms"]) for e in events_of(faketime_db, run_id)]
    assert kinds[2:] == [
        ("attempt.abandoned", expiry),
        ("attempt.queued", expiry),
        ("attempt.running", expiry + BACKOFF_MS),
    ]


def test_a_finish_past_the_lease_counts_until_someone_abandons(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Work done past the lease is still recorded while the attempt was not marked abandoned."""
    (run_id,) = admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    done = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        faketime_cluster.freeze_clock_at_ms(start + 10 * LEASE_MS)
        finished = ingress.finish_attempt(attempt.attempt_id, token, done)
        assert ingress.abandon_expired_attempts(10) == []
    assert finished.recorded
    assert [a["state"] for a in attempts_of(faketime_db, run_id)] == ["succeeded"]


def test_no_attempt_left_after_the_last_one_is_abandoned(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """An abandoned last attempt queues nothing: the run has used its max_attempts."""
    (run_id,) = admit(faketime_db)
    start = _frozen_start(faketime_db, faketime_cluster)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (first,) = take(ingress, token)
        ingress.finish_attempt(first.attempt_id, token, FAILED)
        faketime_cluster.freeze_clock_at_ms(start + BACKOFF_MS)
        (second,) = take(ingress, token)
        faketime_cluster.freeze_clock_at_ms(start + BACKOFF_MS + LEASE_MS)
        (abandoned,) = ingress.abandon_expired_attempts(10)
    assert (abandoned.attempt_id, abandoned.next_attempt_id) == (second.attempt_id, None)
    assert [a["state"] for a in attempts_of(faketime_db, run_id)] == ["failed", "abandoned"]
    assert events_of(faketime_db, run_id)[-1]["payload"]["retried"] is False


def test_an_abandoned_attempts_successor_waits_out_the_grace(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """With no backoff, the successor of an abandoned attempt starts at expiry + grace, not before.

    The old worker may still be killing its command at the expiry: the grace covers its kill
    margin, so one Run's command never runs in two places at once.
    """
    at_once = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=0)
    (run_id,) = admit(faketime_db, execution=at_once)
    start = _frozen_start(faketime_db, faketime_cluster)
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, uuid4(), worker_id="dead-worker")
        expiry = start + LEASE_MS
        faketime_cluster.freeze_clock_at_ms(expiry)
        (abandoned,) = ingress.abandon_expired_attempts(10)
        assert abandoned.attempt_id == attempt.attempt_id
        assert abandoned.next_not_before_ms == expiry + ATTEMPT_SUCCESSOR_GRACE_MS
        faketime_cluster.freeze_clock_at_ms(expiry + ATTEMPT_SUCCESSOR_GRACE_MS - 1)
        assert take(ingress, uuid4()) == []
        faketime_cluster.freeze_clock_at_ms(expiry + ATTEMPT_SUCCESSOR_GRACE_MS)
        (successor,) = take(ingress, uuid4(), worker_id="live-worker")
    assert (successor.attempt_id, successor.attempt_number) == (abandoned.next_attempt_id, 2)
    assert successor.taken_at_ms - abandoned.lease_expired_at_ms == ATTEMPT_SUCCESSOR_GRACE_MS
    assert [a["state"] for a in attempts_of(faketime_db, run_id)] == ["abandoned", "running"]


def test_the_successor_grace_covers_the_kill_margin(ql3_db: Ql3Database) -> None:
    """The database's grace is the documented constant, and covers the worker's kill margin."""
    ((grace,),) = fetch(ql3_db.dsn("worker_ingress"), "SELECT ql3.attempt_successor_grace_ms()")
    assert grace == ATTEMPT_SUCCESSOR_GRACE_MS
    assert ATTEMPT_SUCCESSOR_GRACE_MS >= ATTEMPT_KILL_MARGIN_MS
