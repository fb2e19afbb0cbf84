"""`ql3 demo --json` end to end: private PostgreSQL, replicas, one SIGKILLed, DB verdict."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from fix_db import clean_env, ql3_executable, run_ql3, sql_rows, wait_for
from ql3_testkit import Ql3Database  # noqa: TC002  # pytest resolves fixture annotations


def test_demo_verdict_is_exact() -> None:
    """The demo's verdict: every occurrence admitted once, none early, each executed once."""
    result = run_ql3(
        "demo", "--json", "--seconds", "6", "--schedules", "3", "--replicas", "3", timeout=240
    )
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    assert verdict["killed_replica"] == "replica-1"
    assert verdict["expected"] >= 3 * 3
    assert verdict["admitted"] == verdict["expected"]
    assert verdict["duplicates"] == 0
    assert verdict["early"] == 0
    assert verdict["missing"] == 0
    assert verdict["rows_per_run"] == "1:1:4"
    # The overlap schedule's 1.5 s command outlasts its second: some of its Runs are skipped.
    assert verdict["overlap_skipped"] >= 1
    assert verdict["overlap_executed"] >= 1
    assert verdict["executed"] + verdict["overlap_skipped"] >= verdict["admitted"]
    assert verdict["not_executed"] == 0
    # One manual Run, triggered twice with one request id: admitted once, executed once.
    assert verdict["manual_request_id"].startswith("demo-")
    assert verdict["manual_repeat_existed"] is True
    assert verdict["manual_runs"] == verdict["manual_executed"] == 1
    assert verdict["worker_exit_code"] == 0
    assert verdict["claims_at_rest"] == 0
    assert verdict["verify_ok"] is True
    assert verdict["lateness_p50_ms"] is not None
    assert verdict["lateness_p99_ms"] >= verdict["lateness_p50_ms"]
    survivors = {
        name: code for name, code in verdict["replica_exit_codes"].items() if name != "replica-1"
    }
    assert set(survivors.values()) == {0}


def _processes() -> dict[int, tuple[int, str, str]]:
    """Return pid -> (parent pid, state, command line) for every live process."""
    table: dict[int, tuple[int, str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), fields[0], cmdline)
    return table


def _descendants(root: int, table: dict[int, tuple[int, str, str]]) -> set[int]:
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {pid for pid, (ppid, _, _) in table.items() if ppid in frontier}
        frontier = children - found
        found |= children
    return found


def _alive(pids: set[int]) -> set[int]:
    table = _processes()
    return {pid for pid in pids if pid in table and table[pid][1] != "Z"}


def test_demo_cleans_up_everything_on_ctrl_c() -> None:
    """SIGINT to a running demo stops its replicas and its PostgreSQL and exits 130."""
    demo = subprocess.Popen(
        [*ql3_executable(), "demo", "--seconds", "120", "--schedules", "2", "--replicas", "2"],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        replicas: set[int] = set()

        def replicas_running() -> bool:
            table = _processes()
            replicas.update(
                pid
                for pid in _descendants(demo.pid, table)
                if "--owner-id replica-" in table[pid][2]
            )
            return len(replicas) == 2

        wait_for(replicas_running, timeout_s=90, what="the demo's replicas")
        started = _descendants(demo.pid, _processes())
        servers = {pid for pid, (_, _, cmd) in _processes().items() if "ql3-demo-pg-" in cmd}
        assert servers, "the demo's PostgreSQL is not visible"
        demo.send_signal(signal.SIGINT)
        _, stderr = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    wait_for(lambda: not _alive(started | servers), timeout_s=30, what="every demo process gone")


def test_demo_against_a_given_database(ql3_db: Ql3Database) -> None:
    """With --dsn the demo uses that database instead of a private one, and judges it the same."""
    result = run_ql3(
        "demo", "--json", "--seconds", "4", "--schedules", "2", "--replicas", "2",
        "--dsn", ql3_db.superuser_dsn, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    assert verdict["missing"] == 0
    assert verdict["duplicates"] == 0
    assert verdict["not_executed"] == 0
    outputs = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT a.output_tail, r.id FROM ql3.attempts AS a JOIN ql3.runs AS r ON r.id = a.run_id"
        " WHERE a.state = 'succeeded'",
    )
    # Every succeeded attempt is one executed Run: the cron series' and the one manual Run.
    assert verdict["manual_executed"] == 1
    assert len(outputs) == verdict["executed"] + verdict["manual_executed"] > 1
    assert all(tail.startswith(f"run {run_id} of demo-") for tail, run_id in outputs)
    names = sql_rows(
        ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.tasks WHERE name LIKE 'demo-%'"
    )
    assert names == [(3,)]  # two, and the overlap schedule
