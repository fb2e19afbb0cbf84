"""Real `ql3 worker` processes and admitted runs for the worker tests (DESIGN §10).

Runs are admitted the way a Coordinator admits them (claim, decide, fenced commit as ql3_runtime),
one per schedule, so a test knows exactly which runs exist; no Coordinator keeps admitting more.
Everything a test asserts is read back from the database (attempts and events, by column name).
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator  # noqa: TC003  # fixture signature
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from fix_db import clean_env, db_now_ms, json_records, kill_leftovers, ql3_executable, wait_for
from psycopg.rows import dict_row
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
    checked_commit,
    resolve_cluster_schedule_decision,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

EVERY_SECOND = ScheduleDefinition(
    cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
)


def admit_runs(db: Ql3Database, executions: dict[str, TaskExecution]) -> dict[str, int]:
    """Create one schedule per name running its execution, admit one run each; name -> run id."""
    with ScheduleAdmin(db.dsn("admin")) as admin:
        due = [
            admin.add_schedule(name, EVERY_SECOND, execution=execution, payload_template={"n": i})
            for i, (name, execution) in enumerate(executions.items())
        ]
    latest = max(record.next_due_at_ms or 0 for record in due)
    wait_for(lambda: db_now_ms(db.superuser_dsn) >= latest, timeout_s=10, what="schedules due")
    command = ClaimClusterScheduleCommand(owner_id="test-admit", claim_token=uuid.uuid4())
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command, len(due))
        commits = [
            checked_commit(claim, resolve_cluster_schedule_decision(claim, 1), 1)
            for claim in claims
        ]
        batch = repo.commit_decisions(commits)
    ids = {record.schedule_id: record.name for record in due}
    return {ids[run.schedule_id]: run.run_id for o in batch.outcomes for run in o.runs}


def rows(dsn: str, statement: str, params: Any = None) -> list[dict[str, Any]]:
    """Run one read statement; its rows by column name."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(statement.encode(), params).fetchall()


def attempts_of(db: Ql3Database, run_id: int) -> list[dict[str, Any]]:
    """Every attempt of a run, in number order."""
    return rows(
        db.dsn("admin"),
        "SELECT * FROM ql3.attempts WHERE run_id = %s ORDER BY attempt_number",
        (run_id,),
    )


def events_of(db: Ql3Database, run_id: int) -> list[dict[str, Any]]:
    """Every event of a run, in id order."""
    return rows(
        db.dsn("admin"),
        "SELECT kind, attempt_id, payload, created_at_ms FROM ql3.events"
        " WHERE run_id = %s ORDER BY id",
        (run_id,),
    )


def wait_for_states(
    db: Ql3Database, run_id: int, states: list[str], *, timeout_s: float = 60
) -> list[dict[str, Any]]:
    """Wait until the run's attempts are in exactly `states` (by number); return them."""
    wait_for(
        lambda: [a["state"] for a in attempts_of(db, run_id)] == states,
        timeout_s=timeout_s,
        what=f"run {run_id} attempts {states}",
    )
    return attempts_of(db, run_id)


def process_gone(pid: int) -> bool:
    """Whether `pid` no longer runs (absent, or a zombie waiting for its parent to reap it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return fields[0] in {"Z", "X"}


@dataclass
class Workers:
    """`ql3 worker` processes started by a test; all are stopped at the end, also on failure."""

    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self, name: str, db: Ql3Database, *args: str, dsn: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start worker `name` (its worker id) as the ql3_worker_ingress login of `db`.

        `dsn` replaces that login's DSN (say, to go through a fault proxy).
        """
        log = (self.workdir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [
                *ql3_executable(),
                "worker",
                "--worker-id",
                name,
                "--log-format",
                "json",
                "--poll-interval-ms",
                "100",
                *args,
            ],
            env=clean_env(QL3_WORKER_DSN=dsn or db.dsn("worker_ingress")),
            stdout=log,
            stderr=log,
            cwd=self.workdir,
        )
        log.close()
        self.processes[name] = process
        return process

    def records(self, name: str) -> list[dict[str, Any]]:
        """Return the worker's JSON log records so far."""
        return json_records((self.workdir / f"{name}.log").read_text(errors="replace"))

    def logged(self, name: str, event: str) -> list[dict[str, Any]]:
        """Return the worker's log records of one `event`."""
        return [record for record in self.records(name) if record.get("event") == event]

    def wait_connected(self, name: str) -> None:
        """Wait until the worker logged that it connected and checked the schema."""
        wait_for(
            lambda: bool(self.logged(name, "worker.connected")),
            timeout_s=60,
            what=f"worker {name} connected",
        )

    def signal(self, name: str, sig: signal.Signals) -> None:
        """Send `sig` to worker `name`."""
        self.processes[name].send_signal(sig)

    def wait_exit(self, name: str, timeout: float = 60) -> int:
        """Wait for worker `name` to exit; its exit code."""
        return self.processes[name].wait(timeout=timeout)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    """Start `ql3 worker` processes; any still running at the end are killed."""
    group = Workers(tmp_path)
    try:
        yield group
    finally:
        kill_leftovers(group.processes)


def kill_group_of(pid_file: Path) -> None:
    """Kill the process group whose leader's pid is in `pid_file` (a test's own leftovers)."""
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            return
