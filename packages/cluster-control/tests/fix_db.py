"""Real PostgreSQL for cluster-control tests: one cluster per session, one database per test.

The cluster comes from the installed ql3-cluster-postgres wheel (no Docker, no mock). A migrated
template database is prepared once; each test gets a fast clone and it is dropped afterwards.
A missing server is a failure with a message saying what to install, never a skip.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import (  # noqa: TC003  # fixtures, dataclasses
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database, prepare_ql3_database

TEMPLATE = "ql3_cc_template"
_counter = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[ThrowawayCluster]:
    """Start one small throwaway PostgreSQL for the whole session and a migrated template."""
    with ThrowawayCluster(name="ql3-cc-tests", settings={"max_connections": "200"}) as cluster:
        prepare_ql3_database(cluster, TEMPLATE, as_template=True)
        yield cluster


@pytest.fixture
def ql3_db(pg_cluster: ThrowawayCluster) -> Iterator[Ql3Database]:
    """Give the test its own migrated database, cloned from the template, dropped after."""
    name = f"cc_{os.getpid()}_{next(_counter)}"
    database = prepare_ql3_database(pg_cluster, name, template=TEMPLATE)
    try:
        yield database
    finally:
        drop_database(pg_cluster, name)


def sql_rows(
    dsn: str, statement: str, params: Sequence[Any] | Mapping[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """Run one statement in autocommit and return its rows (empty when it returns none)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement.encode(), params)
        return cursor.fetchall() if cursor.description else []


def db_now_ms(dsn: str) -> int:
    """Read the database clock: the only 'now' a test may use (rule zero)."""
    return int(
        sql_rows(dsn, "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0][0]
    )


def wait_for(condition: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    """Poll `condition` until true or fail after `timeout_s` (monotonic deadline)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def ql3_executable() -> list[str]:
    """Return the installed `ql3` console script of the environment under test."""
    script = Path(sys.executable).parent / "ql3"
    if script.exists():
        return [str(script)]
    found = shutil.which("ql3")
    if found is None:
        pytest.fail("the `ql3` console script is not installed in this environment")
    return [found]


def clean_env(**extra: str) -> dict[str, str]:
    """Return the test process environment without QL3_* variables, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
    env.update(extra)
    return env


def run_ql3(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `ql3 ARGS` to completion, capturing output."""
    return subprocess.run(
        [*ql3_executable(), *args],
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_records(log: str) -> list[dict[str, Any]]:
    """Return the JSON objects of a `--log-format json` log, one a line.

    Lines that are not JSON objects (a traceback, a half-written last line) are passed over: a
    test asks whether a record is there, and a torn line is not one yet.
    """
    records = []
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def kill_leftovers(processes: Mapping[str, subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process a test started that still runs, and reap it (fixture teardown)."""
    for process in processes.values():
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)


@dataclass
class Replicas:
    """`ql3 run` processes started by a test; all are stopped at the end, also on failure."""

    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self,
        name: str,
        dsn: str,
        *args: str,
        preload: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start replica `name` (its owner id) against `dsn`, optionally with env additions."""
        env = clean_env(QL3_DSN=dsn, **(preload or {}))
        log = (self.workdir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [*ql3_executable(), "run", "--owner-id", name, "--log-format", "json", *args],
            env=env,
            stdout=log,
            stderr=log,
        )
        log.close()
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        """Return the replica's output so far."""
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def logged(self, name: str, event: str) -> bool:
        """Tell whether the replica's JSON log has a record with this `event`."""
        return any(record.get("event") == event for record in json_records(self.log(name)))

    def wait_ready(self, *names: str, timeout_s: float = 60) -> None:
        """Wait until each replica logged that it connected (start-up is slow on a busy host)."""
        for name in names:
            wait_for(
                functools.partial(self.logged, name, "service.connected"),
                timeout_s=timeout_s,
                what=f"replica {name} connected",
            )

    def terminate(self, name: str, timeout: float = 20) -> int:
        """SIGTERM a replica and return its exit code."""
        process = self.processes[name]
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def kill(self, name: str) -> None:
        """SIGKILL a replica (a crash)."""
        process = self.processes[name]
        process.kill()
        process.wait(timeout=20)

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every running replica and wait; returns exit codes of those it stopped."""
        codes: dict[str, int] = {}
        running = {name: p for name, p in self.processes.items() if p.poll() is None}
        for process in running.values():
            process.send_signal(signal.SIGTERM)
        for name, process in running.items():
            try:
                codes[name] = process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = process.wait()
        return codes


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    """Start `ql3 run` replicas; any still running at the end are killed."""
    group = Replicas(tmp_path)
    try:
        yield group
    finally:
        kill_leftovers(group.processes)
