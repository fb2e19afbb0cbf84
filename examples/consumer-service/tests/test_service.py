"""The consuming service against the installed QL3 wheels and a throwaway PostgreSQL.

An operator's steps, with the `ql3` command of the installed wheel: migrate, add a per-second
schedule with no command (the service's Python task), run a `ql3 run` Coordinator; the service
(`python -m consumer_service`) is the worker. The verdict is read from the database: every Run
has exactly one attempt, succeeded, and the task was handed that Run's id (its outbox file).
Only time.monotonic() measures waits; every time value asserted is the database's.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg.rows import dict_row
from ql3_cluster_postgres import create_login_user
from ql3_testkit import ThrowawayCluster

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

DATABASE = "billing"
RUNS_WANTED = 3
ROLES = ("admin", "runtime", "worker_ingress")


def _ql3() -> str:
    """Return the `ql3` console script installed beside this interpreter (from the wheel)."""
    found = Path(sys.executable).parent / "ql3"
    assert found.exists(), f"no ql3 next to {sys.executable}: install ql3-cluster-control"
    return str(found)


def _env(**extra: str) -> dict[str, str]:
    """Return this environment without QL3_* settings, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
    env.update(extra)
    return env


def _ql3_ok(*args: str) -> str:
    """Run `ql3 ARGS`; its stdout, failing the test on a non-zero exit."""
    done = subprocess.run(
        [_ql3(), *args], capture_output=True, text=True, env=_env(), timeout=120, check=False
    )
    assert done.returncode == 0, f"ql3 {args[0]}: {done.stderr}"
    return done.stdout


def _rows(dsn: str, statement: str) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(statement.encode()).fetchall()


def _wait_for(condition: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def dsns() -> Iterator[dict[str, str]]:
    """Start a throwaway PostgreSQL with a migrated QL3 database and one login per role."""
    with ThrowawayCluster(name="ql3-consumer") as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}".encode())
        superuser = cluster.dsn(DATABASE)
        _ql3_ok("migrate", "--dsn", superuser)  # as a superuser: provisions the roles first
        found = {"superuser": superuser}
        for role in ROLES:
            name, password = f"billing_{role}", secrets.token_hex(12)
            create_login_user(superuser, name, password, role)
            found[role] = cluster.dsn(DATABASE, user=name, password=password)
        yield found


def _start(argv: list[str], log: Path, cwd: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=out, env=_env(**env), cwd=cwd)


def _stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, log.read_text(errors="replace")[-2000:]


def _settled_runs(admin: str) -> int:
    """Count the runs whose attempts are all finished (nothing queued or running)."""
    (row,) = _rows(
        admin,
        "SELECT count(*) AS n FROM ql3.runs AS r WHERE NOT EXISTS (SELECT 1 FROM ql3.attempts"
        " AS a WHERE a.run_id = r.id AND a.state IN ('queued', 'running'))",
    )
    return int(row["n"])


def _open_runs(admin: str) -> int:
    (row,) = _rows(
        admin, "SELECT count(*) AS n FROM ql3.attempts WHERE state IN ('queued', 'running')"
    )
    return int(row["n"])


def test_each_run_of_the_python_task_succeeds_once_with_its_run_id(
    dsns: dict[str, str], tmp_path: Path
) -> None:
    """Per-second runs admitted by `ql3 run` are each executed once by the service's Worker."""
    admin = dsns["admin"]
    added = _ql3_ok("schedule", "add", "invoices", "--cron", "* * * * * *", "--dsn", admin)
    assert "invoices" in added
    outbox = tmp_path / "outbox"
    service = _start(
        [sys.executable, "-m", "consumer_service"],
        tmp_path / "service.log",
        tmp_path,
        QL3_WORKER_DSN=dsns["worker_ingress"],
        QL3_WORKER_ID="billing-1",
        QL3_WORKER_POLL_INTERVAL_MS="100",
        CONSUMER_OUTBOX=str(outbox),
    )
    coordinator = _start(
        [_ql3(), "run", "--poll-interval-ms", "200", "--log-format", "json"],
        tmp_path / "coordinator.log",
        tmp_path,
        QL3_DSN=dsns["runtime"],
    )
    try:
        _wait_for(
            lambda: _settled_runs(admin) >= RUNS_WANTED,
            timeout_s=90,
            what=f"{RUNS_WANTED} runs executed",
        )
        _stop(coordinator, tmp_path / "coordinator.log")
        _wait_for(lambda: _open_runs(admin) == 0, timeout_s=60, what="every admitted run done")
        _stop(service, tmp_path / "service.log")
    finally:
        for process in (coordinator, service):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=20)
    runs = _rows(
        admin,
        "SELECT r.id, r.scheduled_for_ms, count(a.id) AS attempts,"
        " count(a.id) FILTER (WHERE a.state = 'succeeded') AS succeeded,"
        " max(a.worker_id) AS worker_id FROM ql3.runs AS r"
        " JOIN ql3.attempts AS a ON a.run_id = r.id GROUP BY r.id ORDER BY r.id",
    )
    assert len(runs) >= RUNS_WANTED
    for run in runs:
        assert (run["attempts"], run["succeeded"], run["worker_id"]) == (1, 1, "billing-1"), run
        message = json.loads((outbox / f"run-{run['id']}.json").read_text(encoding="utf-8"))
        assert message == {
            "run_id": run["id"],
            "attempt": 1,
            "scheduled_for_ms": run["scheduled_for_ms"],
            "worker_id": "billing-1",
        }
    assert len(list(outbox.iterdir())) == len(runs)
    assert _ql3_ok("verify", "--dsn", admin).startswith("ok:")
    shutil.rmtree(outbox)
