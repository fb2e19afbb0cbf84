"""Execution under faults (DESIGN §10): real `ql3 worker` processes run what `ql3 run` admits.

Each scenario starts one Coordinator replica and real workers, adds every-second schedules whose
runs execute a shell command (or a transactional Python task), injects its fault, proves from
the database (and the processes' exit codes and logs) that the fault happened, and ends with the
admission checks of every scenario plus `judge_execution` (chaos/workers.py): every Run ends with
exactly one succeeded attempt, or with all its attempts used when its command always fails; none
abandoned without a successor; no two live attempts; retries never before their database-time
backoff. The scenarios that cut a worker off mid-task are in test_workers_cut_off.py.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness import SLACK, Bound, wait_until
from ql3_runtime_core import TaskExecution
from worker_scenarios import (
    REPLICA_LEASE_MS,
    WINDOW_S,
    WORKER_LEASE_MS,
    conclude,
    running_since,
    start_with_workers,
)
from workers import attempts

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

TIMEOUT_MS = 1_000
# worker-db-restart: the replica backs off at most this long between reconnect tries
# (`QL3_RETRY_MAX_MS`; 10 s by default), so its lateness bound can name it.
RESTART_RETRY_MAX_MS = 1_000
SUCCEEDED_SQL = "SELECT count(*) FROM ql3.attempts WHERE state = 'succeeded'"


def test_sigkilled_worker_is_abandoned_by_lease_and_its_runs_retried(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """A SIGKILLed worker's attempts are abandoned after their lease and retried, once each."""
    run = scenario("worker-sigkill", "8")
    workers = start_with_workers(run, 2)
    run.add_schedules(
        1,
        window_s=WINDOW_S,
        execution=TaskExecution(
            command="sleep 2; echo done $QL3_RUN_ID", max_attempts=3, retry_backoff_ms=0
        ),
    )
    wait_until(
        lambda: bool(running_since(run, 300)), timeout_s=30, what="a command running for 300 ms"
    )
    holder = running_since(run, 300)[0][1]
    victim = next(w for w in workers.started if w.worker_id == holder)
    survivor = next(w for w in workers.started if w.worker_id != holder)
    assert victim.kill() == -signal.SIGKILL, victim.tail()
    orphaned = [row[0] for row in running_since(run, 0) if row[1] == holder]
    assert orphaned, "the killed worker held no running attempt"
    run.fault(f"SIGKILL worker {holder} holding {len(orphaned)} running attempt(s)")
    conclude(run, workers)
    by_id = {a["id"]: a for a in attempts(run)}
    abandoned = run.fetch_admin(
        "SELECT attempt_id, payload, created_at_ms FROM ql3.events"
        " WHERE kind = 'attempt.abandoned' AND attempt_id = ANY(%s)",
        (orphaned,),
    )
    assert len(abandoned) == len(orphaned), "an orphaned attempt was not abandoned"
    margins = []
    for attempt_id, payload, at_ms in abandoned:
        assert by_id[attempt_id]["state"] == "abandoned"
        assert payload["worker_id"] == holder
        assert payload["retried"] is True
        margins.append(int(at_ms) - int(payload["lease_expired_at_ms"]))
        successor = next(
            a
            for a in by_id.values()
            if a["run_id"] == by_id[attempt_id]["run_id"]
            and a["number"] == by_id[attempt_id]["number"] + 1
        )
        assert (successor["state"], successor["worker_id"]) == ("succeeded", survivor.worker_id)
    assert min(margins) >= 0, f"abandoned before the lease expired: {margins} ms"
    logged = [r for r in survivor.events("attempt.abandoned") if r.get("holder") == holder]
    assert len(logged) == len(orphaned), survivor.tail()
    run.note(
        f"{len(orphaned)} attempt(s) of the killed worker abandoned by {survivor.worker_id}"
        f" {min(margins)}-{max(margins)} ms after their lease expired (database time),"
        f" lease {WORKER_LEASE_MS} ms; each successor succeeded"
    )


def test_a_failed_first_attempt_is_retried_after_its_backoff(
    scenario: Callable[[str, str], Scenario], tmp_path: Path
) -> None:
    """A command failing once succeeds after the backoff; one always failing exhausts them."""
    run = scenario("worker-retry-after-failure", "8")
    workers = start_with_workers(run, 2)
    markers = tmp_path / "markers"
    markers.mkdir()
    flaky = (
        f'm={markers}/$QL3_RUN_ID; if [ -e "$m" ]; then echo second;'
        ' else touch "$m"; echo first >&2; exit 3; fi'
    )
    backoff_ms = 500
    (flaky_id,) = run.add_schedules(
        1,
        window_s=WINDOW_S,
        prefix="flaky",
        execution=TaskExecution(command=flaky, max_attempts=3, retry_backoff_ms=backoff_ms),
    )
    broken = run.add_schedules(
        1,
        window_s=WINDOW_S,
        prefix="broken",
        execution=TaskExecution(command="echo no; exit 7", max_attempts=2, retry_backoff_ms=0),
    )
    verdict = conclude(run, workers, exhausting=broken)
    every = attempts(run)
    flaky_runs = {a["run_id"] for a in every if a["schedule_id"] == flaky_id}
    firsts = [a for a in every if a["run_id"] in flaky_runs and a["number"] == 1]
    assert {(a["state"], a["exit_code"]) for a in firsts} == {("failed", 3)}
    assert len(list(markers.iterdir())) == len(flaky_runs)
    for first in firsts:
        (retry,) = [a for a in every if (a["run_id"], a["number"]) == (first["run_id"], 2)]
        assert retry["not_before_ms"] == first["finished_at_ms"] + backoff_ms
    exhausted = [a for a in every if a["schedule_id"] in broken]
    assert {(a["state"], a["exit_code"]) for a in exhausted} == {("failed", 7)}
    assert verdict.exhausted == len({a["run_id"] for a in exhausted})
    run.fault(f"{len(firsts)} first attempts exited 3 (marker absent)")
    run.fault(f"{len(exhausted)} attempts of an always-failing command exited 7")
    run.note(f"every retry's not_before_ms = the failure's end + {backoff_ms} ms (database time)")


def test_a_hanging_command_is_killed_at_its_timeout_and_retried(
    scenario: Callable[[str, str], Scenario], tmp_path: Path
) -> None:
    """A hanging first attempt is killed at its timeout (group), timed_out, and retried."""
    run = scenario("worker-timeout", "8")
    workers = start_with_workers(run, 2)
    pids = tmp_path / "pids"
    pids.mkdir()
    hang = (
        f'if [ "$QL3_ATTEMPT" = 1 ]; then sleep 60 & echo $! > {pids}/$QL3_RUN_ID; wait; fi;'
        " echo done"
    )
    run.add_schedules(
        1,
        window_s=WINDOW_S,
        execution=TaskExecution(
            command=hang, timeout_ms=TIMEOUT_MS, max_attempts=2, retry_backoff_ms=0
        ),
    )
    conclude(run, workers)
    every = attempts(run)
    timed_out = [a for a in every if a["number"] == 1]
    assert {a["state"] for a in timed_out} == {"timed_out"}
    assert {a["exit_code"] for a in timed_out} <= {-signal.SIGTERM, -signal.SIGKILL}
    spans = [a["finished_at_ms"] - a["started_at_ms"] for a in timed_out]
    assert min(spans) >= TIMEOUT_MS, spans
    hung = [int(path.read_text()) for path in pids.iterdir()]
    assert len(hung) == len(timed_out)
    wait_until(
        lambda: all(_gone(pid) for pid in hung),
        timeout_s=5,
        what="every hung `sleep 60` is gone",
    )
    run.fault(f"{len(timed_out)} first attempts hung (sleep 60) past a 1 s timeout")
    run.note(
        f"timed out after {min(spans)}-{max(spans)} ms (database time); exit codes"
        f" {sorted({a['exit_code'] for a in timed_out})}; each group's `sleep 60` gone"
    )


def _gone(pid: int) -> bool:
    """Whether `pid` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return fields[0] in {"Z", "X"}


def test_database_restart_under_running_workers(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """PostgreSQL restarted while workers run commands: every Run still succeeds exactly once."""
    run = scenario("worker-db-restart", "8")
    # Durable (fsync, synchronous_commit on): an immediate stop must not lose what the server
    # acknowledged, or the workers' recorded ends would vanish with it.
    workers = start_with_workers(
        run, 2, durable=True, replica_env={"QL3_RETRY_MAX_MS": str(RESTART_RETRY_MAX_MS)}
    )
    window_s = 8
    run.add_schedules(
        2,
        window_s=window_s,
        execution=TaskExecution(command="sleep 1; echo ok", max_attempts=3, retry_backoff_ms=0),
    )
    wait_until(lambda: bool(running_since(run, 200)), timeout_s=30, what="a command is running")
    wait_until(
        lambda: int(run.fetch_admin(SUCCEEDED_SQL)[0][0]) > 0,
        timeout_s=30,
        what="a run executed before the fault",
    )
    wait_until(
        lambda: bool(running_since(run, 100)), timeout_s=10, what="a command is running still"
    )
    running = [attempt_id for attempt_id, _ in running_since(run, 0)]
    before = run.fetch_superuser("SELECT pg_postmaster_start_time()")[0][0]
    cluster = run.cluster
    assert cluster is not None
    started = time.monotonic()
    cluster.restart()
    restart_s = time.monotonic() - started
    after = run.fetch_superuser("SELECT pg_postmaster_start_time()")[0][0]
    assert after > before, "the server did not restart"
    assert running, "no attempt was running at the restart"
    run.fault(f"PostgreSQL restarted (immediate stop) with {len(running)} attempt(s) running")
    replica_faults = len(run.replicas[0].events("service.fault"))
    # An occurrence due during the restart waits for the server (measured), the replica's next
    # reconnect try (backoff capped), a claim of its own that survived the immediate stop (the
    # lease: durable cluster), then a cycle.
    bound = Bound.of(
        ("restart, measured", int(restart_s * 1000)),
        ("reconnect backoff cap", RESTART_RETRY_MAX_MS),
        ("lease of a claim held at the stop", REPLICA_LEASE_MS),
        SLACK,
    )
    conclude(run, workers, bound=bound, window_s=window_s)
    # A worker notices the restart as a failed call, or as its pool's reconnection: each pooled
    # connection is checked before use, so a dead one is replaced instead of failing a call.
    faults = workers.count("worker.fault")
    reconnects = sum(
        1 for w in workers.started for r in w.records() if r.get("logger") == "psycopg.pool"
    )
    assert faults + reconnects >= 1, workers.logs()
    assert replica_faults >= 1, run.logs()
    ended = {a["id"]: a["state"] for a in attempts(run) if a["id"] in running}
    run.note(
        f"restart took {restart_s:.1f} s; workers logged {faults} worker.fault and"
        f" {reconnects} pool reconnection warnings, {workers.count('attempt.lost')}"
        f" attempt.lost, the replica {replica_faults} service.fault; the attempts running at"
        f" the restart ended {sorted(ended.values())}"
    )
