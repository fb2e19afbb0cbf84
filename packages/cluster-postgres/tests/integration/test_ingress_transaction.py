"""A transactional task's writes commit with its attempt's success, or vanish with it.

`WorkerIngress.finish_in_transaction` runs the task's work on the worker's connection inside a
transaction and records the attempt succeeded in that same transaction. The task writes into a
table of its own (`public.task_effects`, granted to the worker role as an operator would).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit, attempts_of, rows, take
from ql3_cluster_postgres import DatabaseError, WorkerIngress
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    RepositoryUnavailableError,
    TaskExecution,
)
from ql3_testkit import WireFaultProxy
from repo_helpers import owner_conn

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database, ThrowawayCluster

PYTHON = TaskExecution(max_attempts=2, timeout_ms=60_000, retry_backoff_ms=0)
TIMEOUT_MS = 60_000


@pytest.fixture
def effects_db(ql3_db: Ql3Database) -> Ql3Database:
    """Give the test database the task's own table, writable by the worker role."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.task_effects (run_id bigint PRIMARY KEY)")
        conn.execute("GRANT SELECT, INSERT ON public.task_effects TO ql3_worker_ingress")
    return ql3_db


def _effects(db: Ql3Database) -> list[int]:
    found = rows(db.superuser_dsn, "SELECT run_id FROM public.task_effects ORDER BY run_id")
    return [row["run_id"] for row in found]


def _record_run(run_id: int) -> Callable[[Any], None]:
    def work(conn: Any) -> None:  # the ingress's TaskConnection
        conn.execute("INSERT INTO public.task_effects (run_id) VALUES (%s)", (run_id,))

    return work


def _started(db: Ql3Database, dsn: str | None = None) -> tuple[WorkerIngress, Any, int]:
    """Admit one Python run and take it; the ingress, the token and the attempt id."""
    (run_id,) = admit(db, execution=PYTHON, prefix="py")
    ingress = WorkerIngress(dsn or db.dsn("worker_ingress"))
    token = uuid4()
    (attempt,) = take(ingress, token, python_tasks=("py00000",), commands=False)
    assert attempt.run_id == run_id
    return ingress, token, attempt.attempt_id


def test_the_work_and_the_success_commit_together(effects_db: Ql3Database) -> None:
    """The task's row and the attempt's success are both there, once."""
    ingress, token, attempt_id = _started(effects_db)
    with ingress:
        (run_id,) = [a["run_id"] for a in _attempts(effects_db)]
        finished = ingress.finish_in_transaction(
            attempt_id, token, _record_run(run_id), timeout_ms=TIMEOUT_MS
        )
    assert finished.recorded
    assert _effects(effects_db) == [run_id]
    assert [a["state"] for a in attempts_of(effects_db, run_id)] == ["succeeded"]


def test_what_the_task_raises_rolls_its_writes_back(effects_db: Ql3Database) -> None:
    """The task's exception comes back unchanged; nothing it wrote is kept; still running."""
    ingress, token, attempt_id = _started(effects_db)

    def breaks(conn: Any) -> None:
        _record_run(1)(conn)
        msg = "the task broke"
        raise LookupError(msg)

    with ingress, pytest.raises(LookupError, match="the task broke"):
        ingress.finish_in_transaction(attempt_id, token, breaks, timeout_ms=TIMEOUT_MS)
    assert _effects(effects_db) == []
    assert [a["state"] for a in _attempts(effects_db)] == ["running"]


def test_a_statement_error_the_task_swallowed_still_rolls_back(effects_db: Ql3Database) -> None:
    """A failed statement the task caught still fails it: nothing it wrote is kept."""
    ingress, token, attempt_id = _started(effects_db)

    def swallows(conn: Any) -> None:
        _record_run(1)(conn)
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")

    with ingress, pytest.raises(RuntimeError, match="nothing it wrote was kept"):
        ingress.finish_in_transaction(attempt_id, token, swallows, timeout_ms=TIMEOUT_MS)
    assert _effects(effects_db) == []


def test_a_lost_lease_makes_the_writes_vanish(effects_db: Ql3Database) -> None:
    """Abandoned while it ran: the finish is refused and the task's writes roll back with it."""
    ingress, token, attempt_id = _started(effects_db)

    def outlives_its_lease(conn: Any) -> None:
        _record_run(1)(conn)
        with owner_conn(effects_db) as owner:  # its lease ends; another worker abandons it
            owner.execute(
                "UPDATE ql3.attempts SET lease_expires_at_ms = started_at_ms + 1 WHERE id = %s",
                (attempt_id,),
            )
        with WorkerIngress(effects_db.dsn("worker_ingress")) as other:
            assert other.abandon_expired_attempts(10)

    with ingress:
        finished = ingress.finish_in_transaction(
            attempt_id, token, outlives_its_lease, timeout_ms=TIMEOUT_MS
        )
    assert (finished.recorded, finished.state_found) == (False, AttemptState.ABANDONED)
    assert _effects(effects_db) == []


def test_a_lost_commit_answer_is_settled_without_a_second_effect(
    effects_db: Ql3Database, pg_cluster: ThrowawayCluster
) -> None:
    """The commit landed but its answer was lost: settling finds the success; one row."""
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as proxy:
        dsn = effects_db.dsn("worker_ingress", port=str(proxy.port))
        ingress, token, attempt_id = _started(effects_db, dsn)
        with ingress:
            (run_id,) = [a["run_id"] for a in _attempts(effects_db)]
            proxy.drop_next_commit_reply()
            with pytest.raises(RepositoryUnavailableError, match="uncertain"):
                ingress.finish_in_transaction(
                    attempt_id, token, _record_run(run_id), timeout_ms=TIMEOUT_MS
                )
            failed = AttemptResult(outcome=AttemptOutcome.FAILED, output_tail="lost")
            settled = ingress.finish_attempt(attempt_id, token, failed, settle=True)
    assert (settled.recorded, settled.state_found, settled.ended_by_this_lease) == (
        False,
        AttemptState.SUCCEEDED,
        True,
    )
    assert _effects(effects_db) == [run_id]


def test_task_events_only_on_an_attempt_it_holds(ql3_db: Ql3Database) -> None:
    """A holder appends a task event; another token appends nothing; attempt.* is refused."""
    (run_id,) = admit(ql3_db)
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        event_id = ingress.append_event(
            run_id, attempt.attempt_id, "task.progress", {"done": 1}, lease_token=token
        )
        stranger = ingress.append_event(
            run_id, attempt.attempt_id, "task.progress", lease_token=uuid4()
        )
        with pytest.raises(DatabaseError, match=r"kind: 1\.\.100 characters"):
            ingress.append_event(run_id, attempt.attempt_id, "attempt.succeeded", lease_token=token)
    assert isinstance(event_id, int)
    assert stranger is None
    kinds = rows(
        ql3_db.dsn("worker_ingress"),
        "SELECT kind, payload FROM ql3.events WHERE run_id = %s AND kind LIKE 'task.%%'",
        (run_id,),
    )
    assert kinds == [{"kind": "task.progress", "payload": {"done": 1}}]


def _attempts(db: Ql3Database) -> list[dict[str, Any]]:
    return rows(db.dsn("worker_ingress"), "SELECT * FROM ql3.attempts ORDER BY id")


def test_an_oversized_event_payload_is_refused_quoting_its_first_100_characters(
    ql3_db: Ql3Database,
) -> None:
    """The refusal names the payload and quotes a bounded excerpt, never the whole document.

    A payload over 4096 characters is refused by the database; the message carries its first
    100 characters (quoted as SQL text) so a log line stays short and still shows what was sent.
    """
    (run_id,) = admit(ql3_db)
    token = uuid4()
    payload = {"note": "x" * 5000}
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        with pytest.raises(DatabaseError) as refused:
            ingress.append_event(
                run_id, attempt.attempt_id, "task.note", payload, lease_token=token
            )
    message = str(refused.value)
    excerpt = ("'" + '{"note": "' + "x" * 5000)[:100]
    assert "payload: must be a JSON object of at most 4096 characters" in message
    assert f"got {excerpt}" in message
    assert f"got {excerpt}x" not in message


def test_an_event_payload_of_exactly_4096_characters_is_the_largest_accepted(
    ql3_db: Ql3Database,
) -> None:
    """The bound is inclusive: 4096 characters of JSON text are appended, 4097 are refused."""
    (run_id,) = admit(ql3_db)
    token = uuid4()
    at_bound = {"note": "x" * (4096 - len('{"note": ""}'))}
    past_bound = {"note": "x" * (4097 - len('{"note": ""}'))}
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        appended = ingress.append_event(
            run_id, attempt.attempt_id, "task.note", at_bound, lease_token=token
        )
        with pytest.raises(DatabaseError, match="at most 4096 characters"):
            ingress.append_event(
                run_id, attempt.attempt_id, "task.note", past_bound, lease_token=token
            )
    (stored,) = rows(
        ql3_db.dsn("worker_ingress"),
        "SELECT length(payload::text) AS length FROM ql3.events WHERE id = %s",
        (appended,),
    )
    assert stored["length"] == 4096


def test_a_task_event_is_stamped_with_the_database_time(ql3_db: Ql3Database) -> None:
    """An appended event's time is the database clock's at the append, in epoch milliseconds."""
    (run_id,) = admit(ql3_db)
    token = uuid4()
    dsn = ql3_db.dsn("worker_ingress")
    with WorkerIngress(dsn) as ingress:
        (attempt,) = take(ingress, token)
        (before,) = rows(dsn, f"SELECT ({NOW_MS}) AS at_ms")
        appended = ingress.append_event(
            run_id, attempt.attempt_id, "task.progress", lease_token=token
        )
        (after,) = rows(dsn, f"SELECT ({NOW_MS}) AS at_ms")
    (event,) = rows(dsn, "SELECT created_at_ms FROM ql3.events WHERE id = %s", (appended,))
    assert before["at_ms"] <= event["created_at_ms"] <= after["at_ms"]


NOW_MS = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
