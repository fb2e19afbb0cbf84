"""Helpers of the cluster-control tests around their database and `ql3` processes.

The databases themselves come from the test kit's fixtures (`ql3_testkit.fixtures`: `pg_cluster`,
`ql3_db`, ... loaded by conftest.py), shared with cluster-postgres's tests; this module only reads
the database clock and rows, waits on conditions, and runs `ql3`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import (  # noqa: TC003  # fixtures, dataclasses
    Callable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any

import psycopg
import pytest


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


def ql3_ok(*args: str) -> str:
    """Run `ql3 ARGS`, require exit 0, and return its standard output."""
    result = run_ql3(*args)
    assert result.returncode == 0, (result.returncode, result.stdout[-4000:], result.stderr)
    return result.stdout


def ql3_fails(code: int, *args: str, env: dict[str, str] | None = None) -> str:
    """Run `ql3 ARGS`, require exit `code` and exactly one `ql3: error:` line; return that line.

    `ql3 run` also logs to stderr; the error itself is exactly one line, never a traceback.
    """
    result = run_ql3(*args, env=env)
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("ql3: error: ")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


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
