"""`ql3 verify` judges what workers did (DESIGN §10): the `attempts` rule and the admission shape.

A history written by the real ingress (failures, retries, an abandoned lease, a release) passes;
histories broken by hand as the owner (a gap in the numbers, a retry after a success, an event
that does not match its attempt) are each reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from ingress_helpers import admit, take
from ql3_cluster_postgres import WorkerIngress, verify_history
from ql3_runtime_core import AttemptOutcome, AttemptResult, TaskExecution
from repo_helpers import owner_conn

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

# Retries at once, a one-second lease: a test can expire it by waiting on the database clock.
RETRY_AT_ONCE = TaskExecution(command="true", max_attempts=4, timeout_ms=60_000, retry_backoff_ms=0)
FAILED = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
SUCCEEDED = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)


def _worked_history(db: Ql3Database) -> int:
    """Fail, release, abandon and finally succeed one run through the ingress; its run id."""
    (run_id,) = admit(db, execution=RETRY_AT_ONCE)
    token = uuid4()
    with WorkerIngress(db.dsn("worker_ingress")) as ingress:
        (first,) = take(ingress, token)
        assert ingress.finish_attempt(first.attempt_id, token, FAILED).recorded
        (second,) = take(ingress, token)
        assert ingress.release_attempts("worker-a", token, [second.attempt_id])
        (second,) = take(ingress, token)
        with owner_conn(db) as conn:  # as if its worker died a lease ago
            conn.execute(
                "UPDATE ql3.attempts SET lease_expires_at_ms = started_at_ms + 1 WHERE id = %s",
                (second.attempt_id,),
            )
        (abandoned,) = ingress.abandon_expired_attempts(10)
        with owner_conn(db) as conn:  # as if the successor grace after that expiry had passed
            conn.execute(
                "UPDATE ql3.attempts SET not_before_ms = created_at_ms WHERE id = %s",
                (abandoned.next_attempt_id,),
            )
        (third,) = take(ingress, token)
        assert third.attempt_id == abandoned.next_attempt_id
        assert ingress.finish_attempt(third.attempt_id, token, SUCCEEDED).recorded
    return run_id


def _single_attempt_runs(db: Ql3Database) -> list[int]:
    """Three runs, each taken once and finished by a worker: one attempt apiece.

    Such runs are judged whole by `verify_shape.sql` (the pass every run goes through), not
    attempt by attempt; the damages below must be caught there too.
    """
    run_ids = admit(db, 3, execution=RETRY_AT_ONCE)
    token = uuid4()
    with WorkerIngress(db.dsn("worker_ingress")) as ingress:
        taken = take(ingress, token)
        assert sorted(t.run_id for t in taken) == run_ids
        for attempt in taken:
            assert ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED).recorded
    return run_ids


@pytest.mark.parametrize("history", ["retried", "single"])
def test_a_history_written_by_workers_passes(ql3_db: Ql3Database, history: str) -> None:
    """Retries, a release and an abandoned lease, or one attempt a run: every rule accepts them.

    The clean controls of the damages below, one for each path (runs judged attempt by attempt,
    runs judged whole by the shape pass).
    """
    (_worked_history if history == "retried" else _single_attempt_runs)(ql3_db)
    report = verify_history(ql3_db.dsn("admin"))
    assert report.ok, report.violations


_RENUMBER = (
    "UPDATE ql3.attempts SET attempt_number = 7 WHERE run_id = %(run)s AND attempt_number = 2"
)
_RETRY_AFTER_SUCCESS = (
    "UPDATE ql3.attempts SET state = 'succeeded' WHERE run_id = %(run)s AND attempt_number = 1"
)
_SECOND_FINAL_EVENT = (
    "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms) SELECT run_id, id,"
    " 'attempt.failed', updated_at_ms FROM ql3.attempts"
    " WHERE run_id = %(run)s AND attempt_number = 3"
)
_RELEASE_FORGOTTEN = "DELETE FROM ql3.events WHERE kind = 'attempt.released' AND run_id = %(run)s"


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        (_RENUMBER, "numbered [1, 3, 7]"),
        (_RETRY_AFTER_SUCCESS, "in state 'succeeded'"),
        (_SECOND_FINAL_EVENT, "2 final event(s)"),
        (_RELEASE_FORGOTTEN, "2 attempt.running events for 0 release(s)"),
    ],
)
def test_a_broken_worker_history_is_caught(ql3_db: Ql3Database, damage: str, detail: str) -> None:
    """Gaps, a retry after success and events that do not match their attempt are `attempts`."""
    run_id = _worked_history(ql3_db)
    with owner_conn(ql3_db) as conn:
        conn.execute(damage.encode(), {"run": run_id})
    report = verify_history(ql3_db.dsn("admin"))
    found = [v.detail for v in report.violations if v.rule == "attempts"]
    assert any(detail in line for line in found), report.violations
    assert {v.rule for v in report.violations} == {"attempts"}


_WRONG_FINAL_KIND = (
    "UPDATE ql3.events SET kind = 'attempt.failed'"
    " WHERE run_id = %(run)s AND kind = 'attempt.succeeded'"
)
_RUNNING_LOST = "DELETE FROM ql3.events WHERE run_id = %(run)s AND kind = 'attempt.running'"
_SECOND_RUNNING = (
    "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms) SELECT run_id, id,"
    " 'attempt.running', started_at_ms FROM ql3.attempts WHERE run_id = %(run)s"
)
_FINAL_LOST = "DELETE FROM ql3.events WHERE run_id = %(run)s AND kind = 'attempt.succeeded'"
_NO_ATTEMPT_NAMED = (
    "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms) SELECT run_id, id + 1000,"
    " 'attempt.released', created_at_ms FROM ql3.attempts WHERE run_id = %(run)s"
)


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        (_WRONG_FINAL_KIND, "(attempt.failed; expected 1 attempt.succeeded)"),
        (_RUNNING_LOST, "has 0 attempt.running events for 0 release(s) (expected 1)"),
        (_SECOND_RUNNING, "has 2 attempt.running events for 0 release(s) (expected 1)"),
        (_FINAL_LOST, "has 0 final event(s) (none; expected 1 attempt.succeeded)"),
        (_NO_ATTEMPT_NAMED, "(1 attempt.released) name attempt"),
    ],
)
def test_a_broken_single_attempt_run_is_caught(
    ql3_db: Ql3Database, damage: str, detail: str
) -> None:
    """A run with one attempt whose events do not tell its story is `attempts`, alone."""
    run_ids = _single_attempt_runs(ql3_db)
    with owner_conn(ql3_db) as conn:
        conn.execute(damage.encode(), {"run": run_ids[1]})
    report = verify_history(ql3_db.dsn("admin"))
    found = [v.detail for v in report.violations if v.rule == "attempts"]
    assert len(found) == 1, report.violations
    assert found[0].startswith(f"run {run_ids[1]}: "), found
    assert detail in found[0], found
    assert {v.rule for v in report.violations} == {"attempts"}


def test_an_event_moved_to_another_run_is_reported_on_both(ql3_db: Ql3Database) -> None:
    """An attempt.running event moved to another run is reported on both runs.

    One run lacks the event; the other holds an event naming an attempt that is not its own.
    """
    first, second, _ = _single_attempt_runs(ql3_db)
    with owner_conn(ql3_db) as conn:
        moved = conn.execute(
            "UPDATE ql3.events SET run_id = %s WHERE run_id = %s AND kind = 'attempt.running'"
            " RETURNING attempt_id",
            (second, first),
        ).fetchone()
    assert moved is not None
    (attempt_id,) = moved
    report = verify_history(ql3_db.dsn("admin"))
    found = sorted(v.detail for v in report.violations if v.rule == "attempts")
    assert len(found) == 2, report.violations
    assert found[0].startswith(
        f"run {first}: attempt {attempt_id} (succeeded) has 0 attempt.running"
    )
    assert found[1] == (
        f"run {second}: its event(s) (1 attempt.running) name attempt {attempt_id},"
        " which is not one of its attempts"
    )
    assert {v.rule for v in report.violations} == {"attempts"}
