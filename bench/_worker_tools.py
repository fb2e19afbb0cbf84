"""The worker benchmark's plumbing: its processes, its database set-up and its readings.

Kept apart from the measurements (`_worker`): starting `bench/_worker_child.py` processes,
waiting (monotonic pacing only) until they are idle or the work is done, admitting Runs with
`bench/sql/worker_seed.sql`, and reading every figure back from the database.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from ql3_cluster_postgres import ScheduleAdmin
from ql3_runtime_core import ScheduleDefinition, TaskExecution

from ._replicas import ReplicaSet
from ._sql import load_sql
from ._worker_child import NOOP_TASK

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import psycopg
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = [
    "NOTIFY_CONNECTIONS",
    "SHELL_TASK",
    "child",
    "last_run",
    "read_window",
    "seed",
    "setup",
    "started_workers",
    "wait_drained",
    "wait_ready",
]

SHELL_TASK: Final = "shell"
NOTIFY_CONNECTIONS: Final = 4
# Never due on its own: no Coordinator runs here; every Run is admitted by the seed statement.
_NEVER: Final = ScheduleDefinition(cron="0 0 1 1 *")
_DRAIN_TIMEOUT_S: Final = 600.0


def child(mode: str, dsn: str, worker_id: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench._worker_child",
        mode,
        "--dsn",
        dsn,
        "--id",
        worker_id,
        *extra,
    ]


@contextmanager
def started_workers(commands: dict[str, list[str]], log_dir: Path) -> Iterator[ReplicaSet]:
    with ReplicaSet(commands=commands, log_dir=log_dir) as started:
        yield started


def seed(su: psycopg.Connection[dict[str, Any]], task: str, count: int) -> int:
    """Admit `count` Runs of `task` at one database instant; that instant (ms)."""
    row = su.execute(load_sql("worker_seed"), {"task": task, "count": count}).fetchone() or {}
    return int(row["admitted_at_ms"])


def last_run(su: psycopg.Connection[dict[str, Any]]) -> int:
    row = su.execute(load_sql("worker_last_run")).fetchone() or {}
    return int(row["run_id"])


def read_window(su: psycopg.Connection[dict[str, Any]], after: int) -> dict[str, Any]:
    return dict(su.execute(load_sql("worker_window"), {"after_run_id": after}).fetchone() or {})


def wait_ready(
    su: psycopg.Connection[dict[str, Any]],
    workers: ReplicaSet,
    *,
    prefix: str,
    sessions: int,
    listeners: int = 0,
) -> None:
    """Wait until the sessions of the workers whose ids start with `prefix` are open (pacing)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = su.execute(load_sql("worker_sessions"), {"prefix": prefix}).fetchone() or {}
        if int(row["sessions"]) >= sessions and int(row["listeners"]) >= listeners:
            time.sleep(0.5)  # let the first polls end: the workers are idle when work arrives
            return
        if not workers.alive():
            break
        time.sleep(0.1)
    msg = f"worker processes not ready: {workers.tail(workers.owners[0])}"
    raise RuntimeError(msg)


def wait_drained(su: psycopg.Connection[dict[str, Any]], workers: ReplicaSet) -> None:
    deadline = time.monotonic() + _DRAIN_TIMEOUT_S
    while time.monotonic() < deadline and workers.alive():
        row = su.execute(load_sql("worker_open")).fetchone() or {}
        if int(row["queued"]) == 0 and int(row["running"]) == 0:
            return
        time.sleep(0.05)
    msg = f"attempts left undone: {workers.tail(workers.owners[0])}"
    raise RuntimeError(msg)


def setup(ctx: BenchContext) -> Ql3Database:
    db = ctx.database("worker")
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.add_schedule(NOOP_TASK, _NEVER, execution=TaskExecution())
        admin.add_schedule(SHELL_TASK, _NEVER, execution=TaskExecution(command="true"))
        for index in range(NOTIFY_CONNECTIONS):
            admin.add_schedule(f"notify-{index}", _NEVER, execution=TaskExecution())
    return db
