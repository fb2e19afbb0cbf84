"""A schedule running a command end to end with the `ql3` verbs only (DESIGN §10).

`ql3 schedule add --command`, a `ql3 run` replica admitting, a `ql3 worker` executing; then
`ql3 runs list`, `ql3 status`, `ql3 schedule list` and the worker's /metrics and /healthz tell
what happened, checked against the database.
"""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from typing import TYPE_CHECKING

from fix_db import ql3_ok, wait_for
from fix_workers import rows

if TYPE_CHECKING:
    from fix_replicas import Replicas
    from fix_workers import Workers
    from ql3_testkit import Ql3Database


def _succeeded(db: Ql3Database, name: str) -> int:
    ((row,),) = [
        tuple(r.values())
        for r in rows(
            db.dsn("admin"),
            "SELECT count(*) FROM ql3.attempts AS a JOIN ql3.runs AS r ON r.id = a.run_id"
            " JOIN ql3.tasks AS t ON t.id = r.task_id WHERE t.name = %s AND a.state = 'succeeded'",
            (name,),
        )
    ]
    return int(row)


def _get(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.status, response.read().decode()


def test_a_scheduled_command_runs_end_to_end(
    ql3_db: Ql3Database, replicas: Replicas, workers: Workers
) -> None:
    """Every second's occurrence is admitted by `ql3 run` and executed once by `ql3 worker`."""
    admin = ql3_db.dsn("admin")
    added = ql3_ok(
        "schedule", "add", "tick", "--cron", "* * * * * *", "--command", "echo tick $QL3_RUN_ID",
        "--max-attempts", "2", "--timeout-s", "30", "--retry-backoff-ms", "0", "--dsn", admin,
    )  # fmt: skip
    assert "runs echo tick $QL3_RUN_ID (attempts 2, timeout 30 s, backoff 0 ms)" in added
    listed = json.loads(ql3_ok("schedule", "list", "--json", "--dsn", admin))
    assert listed[0]["execution"] == {
        "command": "echo tick $QL3_RUN_ID",
        "max_attempts": 2,
        "timeout_ms": 30_000,
        "retry_backoff_ms": 0,
        # The overlap policy's defaults: every due Run starts at once, as before schema 9.
        "overlap": "allow",
        "max_running": None,
    }
    replicas.start("r1", ql3_db.dsn("runtime"))
    workers.start("w1", ql3_db, "--metrics-port", "0")
    wait_for(lambda: _succeeded(ql3_db, "tick") >= 3, timeout_s=90, what="three runs executed")
    assert replicas.terminate("r1") == 0
    (serving,) = workers.logged("w1", "metrics.serving")
    _, metrics = _get(int(serving["port"]), "/metrics")
    counted = re.search(r'ql3_worker_attempts_total\{outcome="succeeded"\} (\d+)', metrics)
    assert counted is not None
    assert int(counted[1]) >= 3
    workers.signal("w1", signal.SIGTERM)
    assert workers.wait_exit("w1") == 0
    runs = json.loads(
        ql3_ok("runs", "list", "--schedule", "tick", "--json", "--limit", "100", "--dsn", admin)
    )
    done = [run for run in runs if run["state"] == "succeeded"]
    assert len(done) == _succeeded(ql3_db, "tick") >= 3
    for run in done:
        (attempt,) = run["attempts"]
        assert attempt["output_tail"] == f"tick {run['run_id']}\n"
        assert attempt["worker_id"] == "w1"
    table = ql3_ok("runs", "list", "--schedule", "tick", "--state", "succeeded", "--dsn", admin)
    assert f"tick {done[0]['run_id']}" in table
    status = json.loads(ql3_ok("status", "--json", "--dsn", admin))
    assert status["attempts"]["succeeded"] == len(done)
    assert status["attempts"]["running"] == 0
    assert re.search(r"attempts: \d+ queued .* \d+ succeeded", ql3_ok("status", "--dsn", admin))
    assert ql3_ok("verify", "--dsn", admin).startswith("ok:")


def test_the_worker_serves_metrics_and_health(ql3_db: Ql3Database, workers: Workers) -> None:
    """/metrics counts outcomes and queue delay; /healthz answers once connected."""
    workers.start("w1", ql3_db, "--metrics-port", "0")
    workers.wait_connected("w1")
    (serving,) = workers.logged("w1", "metrics.serving")
    port = int(serving["port"])
    assert _get(port, "/healthz") == (200, "ok\n")
    _, text = _get(port, "/metrics")
    assert 'ql3_worker_attempts_total{outcome="succeeded"} 0.0' in text
    assert "ql3_worker_running 0.0" in text
    assert "ql3_attempt_queue_delay_seconds_count 0.0" in text
