"""Helpers of the WorkerIngress tests: admit runs, read attempts and events back (no fixtures).

Runs are admitted the way the Coordinator does (claim and fenced commit as ql3_runtime); what a
test checks is then read back from the database as the worker role, by column name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

import psycopg
from psycopg.rows import dict_row
from ql3_cluster_postgres import PostgresScheduleRepository, WorkerIngress
from ql3_runtime_core import TakenAttempt, TaskExecution
from repo_helpers import command, decide, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

LEASE_MS = 5_000
SHELL = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=5_000)


def admit(
    db: Ql3Database, count: int = 1, *, execution: TaskExecution = SHELL, prefix: str = "s"
) -> list[int]:
    """Create `count` due schedules running `execution` and admit one run each; their run ids."""
    make_schedules(db, count, shift_back_ms=2_000, prefix=prefix, execution=execution)
    return admit_due(db)


def admit_due(db: Ql3Database) -> list[int]:
    """Admit one run of every due schedule, as a Coordinator would; the new run ids."""
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 16)
        batch = repo.commit_decisions([decide(claim, budget=1) for claim in claims])
    return sorted(run.run_id for outcome in batch.outcomes for run in outcome.runs)


def take(
    ingress: WorkerIngress,
    token: UUID | None = None,
    *,
    limit: int = 10,
    worker_id: str = "worker-a",
    python_tasks: tuple[str, ...] = (),
    commands: bool = True,
) -> list[TakenAttempt]:
    """Take attempts under `token` (a fresh one when None) with the test lease."""
    return ingress.take_attempts(
        worker_id=worker_id,
        lease_token=token or uuid4(),
        lease_ms=LEASE_MS,
        limit=limit,
        python_tasks=python_tasks,
        commands=commands,
    )


def rows(dsn: str, statement: str, params: Any = None) -> list[dict[str, Any]]:
    """Run one read statement; its rows by column name."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(statement, params).fetchall()


def attempts_of(db: Ql3Database, run_id: int) -> list[dict[str, Any]]:
    """Every attempt of a run, in number order, as the worker role reads them."""
    return rows(
        db.dsn("worker_ingress"),
        "SELECT * FROM ql3.attempts WHERE run_id = %s ORDER BY attempt_number",
        (run_id,),
    )


def events_of(db: Ql3Database, run_id: int) -> list[dict[str, Any]]:
    """Every event of a run after its admission (kind, attempt, payload, time), in id order."""
    return rows(
        db.dsn("worker_ingress"),
        "SELECT e.kind, e.attempt_id, e.payload, e.created_at_ms FROM ql3.events AS e"
        " WHERE e.run_id = %s AND e.kind <> 'run.admitted' ORDER BY e.id",
        (run_id,),
    )
