"""The overlap policy `replace` with a real `ql3 worker` process (DESIGN §10).

A cron Run of a `replace` schedule (cap 1) runs a command that keeps writing ticks; a manual Run
of the same schedule is triggered (manual Runs count as live Runs and obey the policy). The take of
the manual Run cancels the cron Run's attempt in the database; the worker that runs it learns so at
its next renewal (the database no longer renews the lease), kills the command's whole process
group and records nothing over `cancelled` (a finish would be refused: see the cluster-postgres
overlap tests).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fix_db import db_now_ms, wait_for
from fix_workers import admit_runs, attempts_of, events_of, kill_group_of, wait_for_states
from ql3_cluster_postgres import ScheduleAdmin, verify_history
from ql3_runtime_core import OverlapPolicy, TaskExecution

if TYPE_CHECKING:
    from pathlib import Path

    from fix_workers import Workers
    from ql3_testkit import Ql3Database


def _group_gone(pgid: int) -> bool:
    """Whether no process of the group `pgid` is left (a zombie leader is reaped by the worker)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_replace_cancels_the_running_attempt_and_its_worker_kills_the_command(
    ql3_db: Ql3Database, workers: Workers, tmp_path: Path
) -> None:
    """The older attempt ends cancelled, its process group is killed, its ticks stop."""
    pid_file, ticks = tmp_path / "shell.pid", tmp_path / "ticks"
    # The manual Run (payload "quick") ends at once; the cron Run ticks until it is killed.
    command = (
        'case "$QL3_TASK_PAYLOAD" in *quick*) exit 0;; esac;'
        f" echo $$ > {pid_file}; while :; do echo tick >> {ticks}; sleep 0.1; done"
    )
    execution = TaskExecution(command=command, max_attempts=1, overlap=OverlapPolicy.REPLACE)
    runs = admit_runs(ql3_db, {"replaced": execution})
    # The shortest lease (5 s): the worker renews every 2/3 s and sees the cancellation by then.
    workers.start("w1", ql3_db, "--lease-ms", "5000")
    try:
        wait_for_states(ql3_db, runs["replaced"], ["running"])
        wait_for(lambda: ticks.exists() and ticks.stat().st_size > 0, timeout_s=15, what="ticks")
        shell = int(pid_file.read_text())
        with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
            manual = admin.trigger_run("replaced", "replace-now", payload={"quick": True})
        (newer,) = wait_for_states(ql3_db, manual.run_id, ["succeeded"])
        (older,) = attempts_of(ql3_db, runs["replaced"])
        assert older["state"] == "cancelled"
        assert older["finished_at_ms"] <= newer["started_at_ms"]
        # The worker kills the whole group at its next renewal (the shell and its sleeps).
        wait_for(lambda: _group_gone(shell), timeout_s=15, what="the command's group killed")
        size = ticks.stat().st_size
        # Half a second of database time later, a loop still alive would have ticked ~5 times.
        since = db_now_ms(ql3_db.superuser_dsn)
        wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= since + 500, timeout_s=10, what="0.5 s")
        assert ticks.stat().st_size == size
    finally:
        kill_group_of(pid_file)
    (record,) = workers.logged("w1", "attempt.lost")
    assert record["attempt_id"] == older["id"]
    (older_again,) = attempts_of(ql3_db, runs["replaced"])
    assert older_again["state"] == "cancelled"  # the finish did not overwrite it
    assert [e["kind"] for e in events_of(ql3_db, runs["replaced"])][-1] == "attempt.cancelled"
    report = verify_history(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
