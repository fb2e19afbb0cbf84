"""WorkerIngress against real PostgreSQL, connected as ql3_worker_ingress."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres import AttemptStateError, PostgresScheduleRepository, WorkerIngress
from ql3_runtime_core import RepositoryUnavailableError
from repo_helpers import command, decide, fetch, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def _admit(db: Ql3Database, schedules: int = 2) -> int:
    """Admit the due occurrences of `schedules` fresh schedules; returns how many runs."""
    make_schedules(db, schedules, shift_back_ms=2000)
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 16)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    return sum(len(outcome.runs) for outcome in batch.outcomes)


def test_take_marks_attempts_running_oldest_first(ql3_db: Ql3Database) -> None:
    """Taking moves queued attempts to running at DB time and appends attempt.running events."""
    admitted = _admit(ql3_db)
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        first = ingress.take_queued_attempts(2)
        rest = ingress.take_queued_attempts(100)
        assert ingress.take_queued_attempts(5) == []
    taken = first + rest
    assert len(taken) == admitted
    assert [a.attempt_id for a in taken] == sorted(a.attempt_id for a in taken)
    assert all(a.taken_at_ms >= a.created_at_ms for a in taken)
    assert all(a.task_name.startswith("s") and a.payload == {} for a in taken)
    states = fetch(ql3_db.dsn("worker_ingress"), "SELECT DISTINCT state FROM ql3.attempts")
    assert states == [("running",)]
    events = fetch(
        ql3_db.dsn("worker_ingress"),
        "SELECT count(*) FROM ql3.events WHERE kind = 'attempt.running'",
    )
    assert events == [(admitted,)]


def test_two_ingress_workers_take_disjoint_attempts(ql3_db: Ql3Database) -> None:
    """SKIP LOCKED: a worker holding attempts in an open transaction does not block another."""
    _admit(ql3_db, 3)
    dsn = ql3_db.dsn("worker_ingress")
    with psycopg.connect(dsn) as holder, WorkerIngress(dsn) as ingress:
        locked = holder.execute(
            "SELECT id FROM ql3.attempts WHERE state = 'queued' ORDER BY id LIMIT 2 FOR UPDATE"
        ).fetchall()
        taken = ingress.take_queued_attempts(100)
        holder.rollback()
    assert {a.attempt_id for a in taken}.isdisjoint({row[0] for row in locked})
    assert taken


def test_state_changes_and_their_errors(ql3_db: Ql3Database) -> None:
    """Running -> succeeded/failed move forward in DB time; wrong states raise naming the id."""
    _admit(ql3_db, 1)
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        ids = [row[0] for row in fetch(ql3_db.dsn("worker_ingress"), "SELECT id FROM ql3.attempts")]
        good, bad = ids[0], ids[1]
        running_at = ingress.mark_running(good)
        with pytest.raises(AttemptStateError, match=f"attempt {good}"):
            ingress.mark_running(good)
        done_at = ingress.mark_succeeded(good)
        assert done_at >= running_at
        with pytest.raises(AttemptStateError, match="'succeeded'"):
            ingress.mark_failed(good, "late")
        failed_at = ingress.mark_failed(bad, "boom")
        with pytest.raises(AttemptStateError, match="does not exist"):
            ingress.mark_succeeded(10**9)
        event_id = ingress.append_event(1, None, "worker.note", {"note": "hi"})
    rows = fetch(
        ql3_db.dsn("worker_ingress"),
        "SELECT attempt_id, kind, payload, created_at_ms FROM ql3.events"
        " WHERE kind LIKE 'attempt.%%' AND kind <> 'attempt.queued' ORDER BY id",
    )
    assert [(a, k) for a, k, _, _ in rows] == [
        (good, "attempt.running"),
        (good, "attempt.succeeded"),
        (bad, "attempt.failed"),
    ]
    assert rows[2][2] == {"error": "boom"}
    assert rows[2][3] == failed_at
    assert fetch(
        ql3_db.dsn("worker_ingress"), "SELECT kind FROM ql3.events WHERE id = %s", (event_id,)
    ) == [("worker.note",)]


def test_ingress_has_no_schedule_access(ql3_db: Ql3Database) -> None:
    """The worker ingress role cannot read schedules (least privilege, §5)."""
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
        ingress.take_queued_attempts(1)
