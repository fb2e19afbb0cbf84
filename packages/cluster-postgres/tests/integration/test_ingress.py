"""WorkerIngress against real PostgreSQL, connected as ql3_worker_ingress (DESIGN §10).

What the database clock decides (leases, expiry, backoff) is in test_ingress_clock.py; this file
covers what is taken, by whom, the fences, release, the one-live-attempt index and the bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit, attempts_of, events_of, rows, take
from pydantic import ValidationError
from ql3_cluster_postgres import SCHEMA_VERSION, WorkerIngress
from ql3_runtime_core import (
    OUTPUT_TAIL_MAX_CHARS,
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    InvalidArgumentError,
    RepositoryUnavailableError,
    TaskExecution,
)
from repo_helpers import make_schedules, owner_conn

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database


def test_take_hands_out_each_attempt_once_with_its_task(ql3_db: Ql3Database) -> None:
    """Taken attempts become running under the caller's token and carry what they execute."""
    run_ids = admit(ql3_db, 3)
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        first = take(ingress, token, limit=2)
        rest = take(ingress, token)
        assert take(ingress, token) == []
    taken = first + rest
    assert sorted(a.run_id for a in taken) == run_ids
    assert all(a.attempt_number == 1 and a.execution.command == "true" for a in taken)
    assert all(a.task_name.startswith("s") and a.payload == {} for a in taken)
    assert all(a.eligible_at_ms == a.created_at_ms <= a.taken_at_ms for a in taken)
    stored = rows(ql3_db.dsn("worker_ingress"), "SELECT * FROM ql3.attempts ORDER BY id")
    assert {(r["state"], r["worker_id"], r["lease_token"]) for r in stored} == {
        ("running", "worker-a", token)
    }
    for attempt in taken:
        (event,) = [e for e in events_of(ql3_db, attempt.run_id) if e["kind"] == "attempt.running"]
        assert event["attempt_id"] == attempt.attempt_id
        assert event["created_at_ms"] == attempt.taken_at_ms
        assert event["payload"] == {
            "worker_id": "worker-a",
            "lease_expires_at_ms": attempt.lease_expires_at_ms,
        }


def test_take_only_what_the_worker_can_run(ql3_db: Ql3Database) -> None:
    """Command tasks go to workers running commands; a Python task only to one that has it."""
    make_schedules(ql3_db, 1, shift_back_ms=2_000, prefix="py", execution=TaskExecution())
    python_run, shell_run = admit(ql3_db, 1, prefix="shell")
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert take(ingress, commands=False, python_tasks=("other",)) == []
        (python,) = take(ingress, commands=False, python_tasks=("py00000",))
        (shell,) = take(ingress, python_tasks=("py00000",))
    assert (python.run_id, python.execution.command) == (python_run, None)
    assert (shell.run_id, shell.execution.command) == (shell_run, "true")


def test_two_workers_take_disjoint_attempts(ql3_db: Ql3Database) -> None:
    """SKIP LOCKED: attempts locked by another transaction are passed over, not waited for."""
    admit(ql3_db, 3)
    with (
        psycopg.connect(ql3_db.dsn("owner")) as holder,
        WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress,
    ):
        locked = holder.execute(
            "SELECT id FROM ql3.attempts WHERE state = 'queued' ORDER BY id LIMIT 2 FOR UPDATE"
        ).fetchall()
        taken = take(ingress)
        holder.rollback()
    assert len(taken) == 1
    assert {a.attempt_id for a in taken}.isdisjoint({row[0] for row in locked})


def test_success_is_final_and_fenced_by_the_token(ql3_db: Ql3Database) -> None:
    """A finish under another token writes nothing; the holder's success ends the run."""
    (run_id,) = admit(ql3_db)
    token = uuid4()
    done = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0, output_tail="ok\n")
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        stranger = ingress.finish_attempt(attempt.attempt_id, uuid4(), done)
        finished = ingress.finish_attempt(attempt.attempt_id, token, done)
        again = ingress.finish_attempt(attempt.attempt_id, token, done)
    assert (stranger.recorded, stranger.state_found) == (False, AttemptState.RUNNING)
    assert (finished.recorded, finished.state_found) == (True, AttemptState.RUNNING)
    assert finished.next_attempt_id is None
    assert (again.recorded, again.state_found) == (False, AttemptState.SUCCEEDED)
    (row,) = attempts_of(ql3_db, run_id)
    assert (row["state"], row["exit_code"], row["output_tail"]) == ("succeeded", 0, "ok\n")
    assert row["finished_at_ms"] == finished.finished_at_ms >= row["started_at_ms"]
    assert (row["lease_token"], row["lease_expires_at_ms"]) == (None, None)
    assert [(e["kind"], e["payload"]) for e in events_of(ql3_db, run_id)][-1] == (
        "attempt.succeeded",
        {"worker_id": "worker-a", "exit_code": 0, "retried": False},
    )


def test_release_puts_the_same_attempt_back_in_the_queue(ql3_db: Ql3Database) -> None:
    """A released attempt is queued again with its number; the old holder can no longer finish."""
    (run_id,) = admit(ql3_db)
    old, new = uuid4(), uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, old)
        assert ingress.release_attempts("worker-a", uuid4(), [attempt.attempt_id]) == []
        # The token is right but the holder the take recorded is not: nothing is handed back.
        assert ingress.release_attempts("worker-z", old, [attempt.attempt_id]) == []
        assert ingress.release_attempts("worker-a", old, [attempt.attempt_id]) == [
            attempt.attempt_id
        ]
        (queued,) = attempts_of(ql3_db, run_id)
        (again,) = take(ingress, new, worker_id="worker-b")
        late = ingress.finish_attempt(
            attempt.attempt_id, old, AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        )
    assert (queued["state"], queued["worker_id"], queued["started_at_ms"]) == ("queued", None, None)
    assert (again.attempt_id, again.attempt_number) == (attempt.attempt_id, 1)
    assert not late.recorded
    kinds = [(e["kind"], e["payload"].get("worker_id")) for e in events_of(ql3_db, run_id)]
    assert kinds == [
        ("attempt.queued", None),
        ("attempt.running", "worker-a"),
        ("attempt.released", "worker-a"),
        ("attempt.running", "worker-b"),
    ]


def test_the_database_refuses_a_second_live_attempt(ql3_db: Ql3Database) -> None:
    """Partial UNIQUE index: no Run ever has two queued/running attempts, whoever writes them."""
    (run_id,) = admit(ql3_db)
    with owner_conn(ql3_db) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation, match="attempts_one_live"):
            conn.execute(
                "INSERT INTO ql3.attempts (run_id, attempt_number, created_at_ms, updated_at_ms)"
                " SELECT run_id, 2, created_at_ms, created_at_ms FROM ql3.attempts"
                " WHERE run_id = %s",
                (run_id,),
            )
        conn.execute("UPDATE ql3.attempts SET state = 'failed' WHERE run_id = %s", (run_id,))
        conn.execute(
            "INSERT INTO ql3.attempts (run_id, attempt_number, created_at_ms, updated_at_ms)"
            " SELECT run_id, 2, created_at_ms, created_at_ms FROM ql3.attempts"
            " WHERE run_id = %s",
            (run_id,),
        )
    assert [a["state"] for a in attempts_of(ql3_db, run_id)] == ["failed", "queued"]


def test_output_tail_is_bounded_and_stored_as_text(ql3_db: Ql3Database) -> None:
    """A tail longer than the bound is refused by the model; a NUL byte is stored as U+FFFD."""
    with pytest.raises(ValidationError, match=str(OUTPUT_TAIL_MAX_CHARS)):
        AttemptResult(outcome=AttemptOutcome.FAILED, output_tail="x" * (OUTPUT_TAIL_MAX_CHARS + 1))
    (run_id,) = admit(ql3_db)
    token = uuid4()
    tail = "a\x00b" + "y" * (OUTPUT_TAIL_MAX_CHARS - 3)
    result = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0, output_tail=tail)
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        assert ingress.finish_attempt(attempt.attempt_id, token, result).recorded
    (row,) = attempts_of(ql3_db, run_id)
    assert row["output_tail"] == tail.replace("\x00", "\ufffd")


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("limit", lambda i: take(i, limit=0)),
        ("lease_ms", lambda i: i.renew_leases(uuid4(), [1], 999)),
        ("worker_id", lambda i: take(i, worker_id=" padded")),
        ("worker_id", lambda i: i.release_attempts("x" * 201, uuid4(), [1])),
        ("limit", lambda i: i.abandon_expired_attempts(2**70)),
    ],
)
def test_out_of_bounds_arguments_are_refused_before_sending(
    ql3_db: Ql3Database, argument: str, call: Callable[[WorkerIngress], object]
) -> None:
    """A limit, lease or worker id outside its bounds is an InvalidArgumentError naming it."""
    with (
        WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress,
        pytest.raises(InvalidArgumentError, match=f"^{argument}:"),
    ):
        call(ingress)


def test_schema_version_is_checked(ql3_db: Ql3Database) -> None:
    """A worker reads the schema version it was built for (the ingress role may read it)."""
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert ingress.check_schema() == SCHEMA_VERSION


def test_ingress_has_no_schedule_access(ql3_db: Ql3Database) -> None:
    """The worker ingress role cannot read schedules (least privilege, DESIGN §11)."""
    with (
        psycopg.connect(ql3_db.dsn("worker_ingress"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT count(*) FROM ql3.trigger_schedules")


def test_unreachable_server_is_repository_unavailable(ql3_db: Ql3Database) -> None:
    """No psycopg or pool class escapes: an unreachable server is RepositoryUnavailableError."""
    dsn = psycopg.conninfo.make_conninfo(ql3_db.dsn("worker_ingress"), port="1")
    with (
        WorkerIngress(dsn, connect_timeout_s=2) as ingress,
        pytest.raises(RepositoryUnavailableError),
    ):
        take(ingress, limit=1)
