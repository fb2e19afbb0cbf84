"""`ql3 worker` as real processes against real PostgreSQL (DESIGN §10).

Each test admits its runs, starts workers, and proves the outcome from the database: attempt
rows (state, exit code, output, database times) and their events, never from a sleep.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from fix_db import db_now_ms, wait_for
from fix_workers import (
    admit_runs,
    attempts_of,
    events_of,
    kill_group_of,
    process_gone,
    rows,
    wait_for_states,
)
from ql3_cluster_postgres import verify_history
from ql3_runtime_core import TaskExecution
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from pathlib import Path

    from fix_workers import Workers
    from ql3_testkit import Ql3Database, ThrowawayCluster


def _kinds(db: Ql3Database, run_id: int) -> list[str]:
    return [event["kind"] for event in events_of(db, run_id)]


def test_a_command_runs_once_with_its_environment(ql3_db: Ql3Database, workers: Workers) -> None:
    """A command runs once with the QL3_* run variables (and not the worker's DSN); exit 0."""
    command = (
        'echo "$QL3_RUN_ID $QL3_ATTEMPT $QL3_SCHEDULE $QL3_SCHEDULED_FOR_MS $QL3_TASK_PAYLOAD"'
        ' && test -z "$QL3_WORKER_DSN"'
    )
    runs = admit_runs(ql3_db, {"echo": TaskExecution(command=command)})
    workers.start("w1", ql3_db)
    (attempt,) = wait_for_states(ql3_db, runs["echo"], ["succeeded"])
    ((occurrence,),) = [
        (row["scheduled_for_ms"],)
        for row in rows(
            ql3_db.dsn("admin"),
            "SELECT scheduled_for_ms FROM ql3.runs WHERE id = %s",
            (runs["echo"],),
        )
    ]
    assert (attempt["exit_code"], attempt["worker_id"]) == (0, "w1")
    assert attempt["output_tail"] == f'{runs["echo"]} 1 echo {occurrence} {{"n":0}}\n'
    assert attempt["started_at_ms"] <= attempt["finished_at_ms"]
    assert _kinds(ql3_db, runs["echo"]) == [
        "run.admitted",
        "attempt.queued",
        "attempt.running",
        "attempt.succeeded",
    ]
    assert verify_history(ql3_db.dsn("admin")).ok


def test_a_failed_attempt_is_retried_after_the_backoff(
    ql3_db: Ql3Database, workers: Workers
) -> None:
    """Attempt 1 exits 3 and is failed; attempt 2 starts no sooner than end + backoff, succeeds."""
    command = 'test "$QL3_ATTEMPT" -ge 2 || { echo "first try fails"; exit 3; }'
    execution = TaskExecution(command=command, max_attempts=3, retry_backoff_ms=1_500)
    runs = admit_runs(ql3_db, {"flaky": execution})
    workers.start("w1", ql3_db)
    first, second = wait_for_states(ql3_db, runs["flaky"], ["failed", "succeeded"])
    assert (first["exit_code"], first["output_tail"]) == (3, "first try fails\n")
    assert second["created_at_ms"] == first["finished_at_ms"]
    assert second["not_before_ms"] == first["finished_at_ms"] + 1_500
    assert second["started_at_ms"] >= second["not_before_ms"]
    assert _kinds(ql3_db, runs["flaky"]) == [
        "run.admitted",
        "attempt.queued",
        "attempt.running",
        "attempt.failed",
        "attempt.queued",
        "attempt.running",
        "attempt.succeeded",
    ]
    assert verify_history(ql3_db.dsn("admin")).ok


def test_a_hanging_command_is_killed_with_its_process_group(
    ql3_db: Ql3Database, workers: Workers, tmp_path: Path
) -> None:
    """Past its timeout the shell and its background child are killed; the attempt timed out."""
    command = f"sleep 300 & echo $! > {tmp_path}/child.pid; echo $$ > {tmp_path}/shell.pid; wait"
    execution = TaskExecution(command=command, max_attempts=1, timeout_ms=1_000)
    runs = admit_runs(ql3_db, {"hang": execution})
    workers.start("w1", ql3_db)
    try:
        (attempt,) = wait_for_states(ql3_db, runs["hang"], ["timed_out"])
        pids = [int((tmp_path / name).read_text()) for name in ("shell.pid", "child.pid")]
        wait_for(lambda: all(map(process_gone, pids)), timeout_s=10, what="command processes gone")
    finally:
        kill_group_of(tmp_path / "shell.pid")
    assert attempt["exit_code"] == -signal.SIGTERM
    # Killed by the worker's monotonic timeout; the database recorded when (rule zero).
    assert attempt["finished_at_ms"] - attempt["started_at_ms"] >= 1_000
    assert _kinds(ql3_db, runs["hang"])[-1] == "attempt.timed_out"
    assert events_of(ql3_db, runs["hang"])[-1]["payload"]["retried"] is False


def test_a_killed_worker_is_abandoned_at_its_lease_and_its_run_retried(
    ql3_db: Ql3Database, workers: Workers, tmp_path: Path
) -> None:
    """SIGKILL mid-command: at the lease's DB expiry another worker abandons and retries it."""
    command = f'test "$QL3_ATTEMPT" -ge 2 || {{ echo $$ > {tmp_path}/orphan.pid; sleep 300; }}'
    execution = TaskExecution(command=command, max_attempts=2, retry_backoff_ms=0)
    runs = admit_runs(ql3_db, {"crash": execution})
    try:
        workers.start("doomed", ql3_db, "--lease-ms", "5000")
        wait_for_states(ql3_db, runs["crash"], ["running"])
        workers.signal("doomed", signal.SIGKILL)
        workers.wait_exit("doomed")
        workers.start("rescuer", ql3_db)
        first, second = wait_for_states(ql3_db, runs["crash"], ["abandoned", "succeeded"])
    finally:
        # A SIGKILLed worker cannot stop its command (its own session): it runs on.
        kill_group_of(tmp_path / "orphan.pid")
    assert (first["worker_id"], second["worker_id"]) == ("doomed", "rescuer")
    abandoned = next(
        e for e in events_of(ql3_db, runs["crash"]) if e["kind"] == "attempt.abandoned"
    )
    assert abandoned["payload"]["worker_id"] == "doomed"
    assert abandoned["created_at_ms"] >= abandoned["payload"]["lease_expired_at_ms"]
    assert first["finished_at_ms"] == abandoned["created_at_ms"] == second["created_at_ms"]
    assert workers.logged("rescuer", "attempt.abandoned")[0]["attempt_id"] == first["id"]
    assert verify_history(ql3_db.dsn("admin")).ok


def test_sigterm_lets_a_running_command_finish_within_the_grace(
    ql3_db: Ql3Database, workers: Workers
) -> None:
    """SIGTERM stops taking; the running command ends on its own and is recorded; exit 0."""
    execution = TaskExecution(command="sleep 2; echo done", max_attempts=1)
    runs = admit_runs(ql3_db, {"short": execution})
    workers.start("w1", ql3_db, "--grace-ms", "30000")
    wait_for_states(ql3_db, runs["short"], ["running"])
    asked_at = db_now_ms(ql3_db.superuser_dsn)
    workers.signal("w1", signal.SIGTERM)
    assert workers.wait_exit("w1") == 0
    (attempt,) = attempts_of(ql3_db, runs["short"])
    assert (attempt["state"], attempt["output_tail"]) == ("succeeded", "done\n")
    assert attempt["finished_at_ms"] >= asked_at
    assert workers.logged("w1", "worker.stopped")[0]["released_attempt_ids"] == []


def test_sigterm_past_the_grace_kills_and_releases(
    ql3_db: Ql3Database, workers: Workers, tmp_path: Path
) -> None:
    """After the grace the command's group is killed; its attempt is queued again, same number."""
    command = f"echo $$ > {tmp_path}/shell.pid; sleep 300"
    runs = admit_runs(ql3_db, {"long": TaskExecution(command=command, max_attempts=1)})
    workers.start("w1", ql3_db, "--grace-ms", "500")
    try:
        wait_for_states(ql3_db, runs["long"], ["running"])
        pid_file = tmp_path / "shell.pid"
        wait_for(pid_file.exists, timeout_s=10, what="command started")
        asked_at = db_now_ms(ql3_db.superuser_dsn)
        workers.signal("w1", signal.SIGTERM)
        assert workers.wait_exit("w1") == 0
        shell = int((tmp_path / "shell.pid").read_text())
        assert process_gone(shell)
    finally:
        kill_group_of(tmp_path / "shell.pid")
    (attempt,) = attempts_of(ql3_db, runs["long"])
    assert (attempt["state"], attempt["attempt_number"], attempt["worker_id"]) == (
        "queued",
        1,
        None,
    )
    released = events_of(ql3_db, runs["long"])[-1]
    assert (released["kind"], released["payload"]) == ("attempt.released", {"worker_id": "w1"})
    assert released["created_at_ms"] - asked_at >= 500
    assert workers.logged("w1", "worker.stopped")[0]["released_attempt_ids"] == [attempt["id"]]
    assert verify_history(ql3_db.dsn("admin")).ok


def test_a_worker_cut_off_from_the_database_stops_its_command(
    ql3_db: Ql3Database, pg_cluster: ThrowawayCluster, workers: Workers, tmp_path: Path
) -> None:
    """Unconfirmed up to its kill margin, a worker kills its command; another retries the run."""
    pid_file = tmp_path / "cut.pid"
    command = f'test "$QL3_ATTEMPT" -ge 2 || {{ echo $$ > {pid_file}; exec sleep 300; }}'
    execution = TaskExecution(command=command, max_attempts=2, retry_backoff_ms=0)
    run_id = admit_runs(ql3_db, {"cut": execution})["cut"]
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as proxy:
        through_proxy = ql3_db.dsn("worker_ingress", port=str(proxy.port))
        workers.start("cut-off", ql3_db, "--lease-ms", "5000", dsn=through_proxy)
        try:
            wait_for_states(ql3_db, run_id, ["running"])
            wait_for(pid_file.exists, timeout_s=10, what="command started")
            pid = int(pid_file.read_text())
            proxy.partition()
            wait_for(lambda: process_gone(pid), timeout_s=15, what="the cut-off worker killed it")
            # It recorded nothing (it could not): the database still holds it as running.
            assert [a["state"] for a in attempts_of(ql3_db, run_id)] == ["running"]
            workers.start("rescuer", ql3_db)
            first, second = wait_for_states(ql3_db, run_id, ["abandoned", "succeeded"])
        finally:
            proxy.heal()
            kill_group_of(pid_file)
    assert (first["worker_id"], second["worker_id"]) == ("cut-off", "rescuer")
    (lost,) = workers.logged("cut-off", "attempt.lost")
    assert lost["reason"] == (
        "no heartbeat confirmed its lease for 2000 ms (lease 5000 ms, kill margin 3000 ms)"
    )
    assert verify_history(ql3_db.dsn("admin")).ok


def test_sigterm_is_honoured_while_the_database_is_silent(
    ql3_db: Ql3Database, pg_cluster: ThrowawayCluster, workers: Workers, tmp_path: Path
) -> None:
    """Bytes stop flowing (no reset): calls are cut at their deadline, SIGTERM still stops it."""
    pid_file = tmp_path / "silent.pid"
    command = f"echo $$ > {pid_file}; exec sleep 300"
    execution = TaskExecution(command=command, max_attempts=2)
    run_id = admit_runs(ql3_db, {"silent": execution})["silent"]
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as proxy:
        through_proxy = ql3_db.dsn("worker_ingress", port=str(proxy.port))
        args = ("--grace-ms", "500", "--statement-timeout-ms", "300")
        workers.start("silent", ql3_db, *args, dsn=through_proxy)
        try:
            wait_for_states(ql3_db, run_id, ["running"])
            wait_for(pid_file.exists, timeout_s=10, what="command started")
            proxy.partition()
            wait_for(
                lambda: bool(workers.logged("silent", "worker.fault")),
                timeout_s=30,
                what="the worker reports the silent database",
            )
            workers.signal("silent", signal.SIGTERM)
            assert workers.wait_exit("silent", timeout=30) == 0
            assert process_gone(int(pid_file.read_text()))
        finally:
            proxy.heal()
            kill_group_of(pid_file)
    assert workers.logged("silent", "worker.stopping")
    # Cut mid-call at its deadline, or (checking a pooled connection) no connection in time.
    silent = ("cut the connection", "couldn't get a connection")
    faults = [record["reason"] for record in workers.logged("silent", "worker.fault")]
    assert any(text in fault for fault in faults for text in silent), faults
    # The release could not reach the database: the attempt waits for its lease to expire.
    assert workers.logged("silent", "worker.stopped")[0]["released_attempt_ids"] == []
    assert [a["state"] for a in attempts_of(ql3_db, run_id)] == ["running"]
