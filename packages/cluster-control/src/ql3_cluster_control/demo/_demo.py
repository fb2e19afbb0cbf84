"""`ql3 demo`: replicas racing on a private PostgreSQL, one crashed, a worker, a verdict.

Without a DSN it starts a private PostgreSQL (`PrivateServer`: the machine's binaries or the
`pgserver` wheel of the `embedded` extra), provisions roles, migrates, creates login users for the
admin, the replicas and the worker, creates schedules firing every second whose runs execute a
shell command (and one under `--overlap skip` whose command outlasts its second), runs N `ql3 run`
replicas and one `ql3 worker` as separate processes, SIGKILLs a replica mid-run, triggers one
manual Run (`ql3 schedule trigger`) and sends the same request again (the second finds the first),
shows admissions per replica and executions live, then stops the survivors gracefully, lets the
worker finish what was admitted, and judges the history read back from the database (through
ql3-cluster-postgres's `HistoryReader`: this package speaks no SQL): every occurrence admitted
exactly once and executed once (or, for the overlap schedule, skipped for overlap with its record).
Expected occurrences come from each schedule's cron and its database-time window, never a node
clock.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ql3_cluster_postgres import ScheduleAdmin, verify_history
from ql3_runtime_core import OverlapPolicy, QL3Error, TaskExecution, next_occurrence_ms
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ql3_cluster_control._schedule_file import schedule_definition

from ._processes import (
    DEMO_LEASE_MS,
    DEMO_WORKER,
    Environment,
    connected,
    demo_database,
    start_replica,
    start_worker,
    stop_processes,
)
from ._verdict import ROWS_PER_RUN, DemoVerdict, count_history, show_verdict

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from types import FrameType

__all__ = ["DemoOptions", "DemoVerdict", "run_demo"]

DEMO_CRON = "* * * * * *"  # every second (6 fields: seconds first)
SETTLE_MS = 1_500  # occurrences this close to the end are not judged: they may be in flight
READY_TIMEOUT_S = 60.0
# What each run executes: a command that says which run and occurrence it is (the worker keeps
# its output on the attempt: `ql3 runs list`).
DEMO_COMMAND = 'echo "run $QL3_RUN_ID of $QL3_SCHEDULE at $QL3_SCHEDULED_FOR_MS"'
DEMO_EXECUTION = TaskExecution(
    command=DEMO_COMMAND, max_attempts=3, timeout_ms=10_000, retry_backoff_ms=1_000
)
# One more schedule shows the overlap policy: its command outlasts the second between its
# occurrences, and under `skip` a Run due while the previous one still runs never executes (its
# attempt ends skipped, its occurrence recorded skipped for overlap).
OVERLAP_COMMAND = f"{DEMO_COMMAND}; sleep 1.5"
OVERLAP_EXECUTION = TaskExecution(
    command=OVERLAP_COMMAND,
    max_attempts=1,
    timeout_ms=10_000,
    retry_backoff_ms=1_000,
    overlap=OverlapPolicy.SKIP,
)
# After the replicas stopped: how long the worker may take to finish what they admitted (it
# runs each echo in milliseconds; this only bounds a stuck demo).
EXECUTION_DRAIN_S = 30.0


@dataclass(frozen=True)
class DemoOptions:
    """What `ql3 demo` was asked to do."""

    replicas: int = 3
    seconds: float = 20.0
    schedules: int = 5
    as_json: bool = False
    dsn: str | None = None
    # `ql3 demo --web`: given the observer's and the admin's DSNs, serves the web console for
    # as long as the demo runs (the CLI passes it: the demo never imports the console).
    serve: Callable[[str, str], AbstractContextManager[object]] | None = None


@dataclass
class _ManualTrigger:
    """The demo's manual Run: sent at `at_s` into the run, then sent again with its request id."""

    at_s: float
    request_id: str
    sent: bool = False
    repeat_existed: bool = False

    def send(self, env: Environment, schedule: str) -> None:
        """Trigger `schedule` twice with one request id: one Run, the second call finds it."""
        with ScheduleAdmin(env.admin_dsn) as admin:
            first = admin.trigger_run(schedule, self.request_id)
            again = admin.trigger_run(schedule, self.request_id)
        self.sent = True
        self.repeat_existed = again.existed and again.run_id == first.run_id and not first.existed


class _InterruptedError(Exception):
    """SIGTERM to the demo itself: clean up like Ctrl-C."""


def _create_schedules(env: Environment, count: int) -> dict[int, tuple[str, int]]:
    """Create `count` every-second command schedules and the overlap one (created last).

    Returns id -> (name, first cursor by DB time).
    """
    prefix = f"demo-{secrets.token_hex(2)}"
    definition = schedule_definition(DEMO_CRON, "UTC", "fire_once", 60_000)
    created: dict[int, tuple[str, int]] = {}
    kinds = [(f"{prefix}-{index + 1:03d}", DEMO_EXECUTION) for index in range(count)]
    with ScheduleAdmin(env.admin_dsn) as admin:
        for name, execution in [*kinds, (f"{prefix}-overlap", OVERLAP_EXECUTION)]:
            record = admin.add_schedule(name, definition, execution=execution)
            if record.next_due_at_ms is not None:
                created[record.schedule_id] = (record.name, record.next_due_at_ms)
    return created


def _wait_connected(env: Environment, live: Live | None, options: DemoOptions) -> None:
    """Wait until every replica and the worker connected: the run starts with all of them."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while any(replica.state == "starting" for replica in env.processes):
        for replica in env.processes:
            if replica.state == "starting" and connected(env, replica):
                replica.state = "running"
            elif replica.process.poll() is not None:
                tail = (env.workdir / f"{replica.name}.log").read_text(errors="replace")[-500:]
                msg = f"demo: {replica.name} exited with {replica.process.returncode}: {tail}"
                raise QL3Error(msg)
        if time.monotonic() > deadline:
            msg = f"demo: replicas or worker did not connect within {READY_TIMEOUT_S:g} s"
            raise QL3Error(msg)
        if live is not None:
            live.update(_progress_table(env, 0.0, options))
        time.sleep(0.2)


def _progress_table(env: Environment, elapsed: float, options: DemoOptions) -> Table:
    counts = env.history.admissions_by_owner()
    attempts = env.history.attempt_counts()
    table = Table(
        title=f"QL3 demo: {elapsed:4.1f} s of {options.seconds:g} s",
        caption="admissions per replica (ql3.runs); runs executed (ql3.attempts succeeded)",
    )
    table.add_column("process")
    table.add_column("pid", justify="right")
    table.add_column("state")
    table.add_column("admitted", justify="right")
    table.add_column("executed", justify="right")
    for replica in env.processes:
        if replica.state in {"starting", "running"} and replica.process.poll() is not None:
            replica.state = f"exited ({replica.process.returncode})"
        worker = replica.kind == "worker"
        table.add_row(
            replica.name,
            str(replica.process.pid),
            replica.state,
            "" if worker else str(counts.get(replica.name, 0)),
            f"{attempts.succeeded} ({attempts.queued + attempts.running} waiting)"
            if worker
            else "",
        )
    table.add_row("total", "", "", str(sum(counts.values())), str(attempts.succeeded))
    return table


def _run_replicas(
    env: Environment, options: DemoOptions, console: Console, manual: tuple[_ManualTrigger, str]
) -> str | None:
    """Run the replicas and the worker for the demo's duration, SIGKILL a replica mid-run.

    The manual trigger is sent once, at its time, to the named schedule. Returns the killed
    replica's name.
    """
    trigger, trigger_schedule = manual
    env.replicas.extend(start_replica(env, index + 1) for index in range(options.replicas))
    env.worker = start_worker(env)
    victim = env.replicas[0] if options.replicas > 1 else None
    kill_at = options.seconds * 0.4
    live = Live(console=console, refresh_per_second=4, transient=False)
    with live if not options.as_json else contextlib.nullcontext():
        _wait_connected(env, None if options.as_json else live, options)
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < options.seconds:
            if victim is not None and victim.state == "running" and elapsed >= kill_at:
                victim.process.send_signal(signal.SIGKILL)
                victim.process.wait()
                victim.state = "SIGKILLed"
            if not trigger.sent and elapsed >= trigger.at_s:
                trigger.send(env, trigger_schedule)
            if not options.as_json:
                live.update(_progress_table(env, elapsed, options))
            time.sleep(0.5)
        if not options.as_json:
            live.update(_progress_table(env, options.seconds, options))
    return None if victim is None else victim.name


def _expected(schedules: dict[int, tuple[str, int]], end_ms: int) -> set[tuple[int, int]]:
    expected = set()
    for schedule_id, (_, first) in schedules.items():
        occurrence = first
        while occurrence <= end_ms:
            expected.add((schedule_id, occurrence))
            occurrence = next_occurrence_ms(DEMO_CRON, "UTC", occurrence)
    return expected


def _drain(env: Environment, schedules: dict[int, tuple[str, int]], end_ms: int) -> None:
    """Wait (monotonic deadline) until the survivors admitted everything due up to `end_ms`."""
    expected = _expected(schedules, end_ms)
    deadline = time.monotonic() + DEMO_LEASE_MS / 1000 + 10
    while time.monotonic() < deadline:
        runs = env.history.runs(list(schedules))
        if expected <= {(run.schedule_id, run.scheduled_for_ms) for run in runs}:
            return
        time.sleep(0.25)


def _drain_execution(env: Environment, schedules: dict[int, tuple[str, int]]) -> None:
    """Wait (monotonic deadline) until the worker ended every admitted run (none live)."""
    deadline = time.monotonic() + EXECUTION_DRAIN_S
    while time.monotonic() < deadline:
        if not any(run.live for run in env.history.runs(list(schedules))):
            return
        time.sleep(0.25)


def _verdict(
    env: Environment,
    schedules: dict[int, tuple[str, int]],
    window: tuple[int, int],
    options: DemoOptions,
    killed: str | None,
    *,
    trigger: _ManualTrigger,
) -> DemoVerdict:
    start_ms, end_ms = window
    ids = list(schedules)
    counts = count_history(env.history.runs(ids), _expected(schedules, end_ms), end_ms)
    report = verify_history(env.admin_dsn, since_ms=start_ms if options.dsn else None)
    at_rest = env.history.claims_held(ids)
    exits = {replica.name: replica.process.returncode for replica in env.replicas}
    worker_exit = None if env.worker is None else env.worker.process.returncode
    graceful = all(code == 0 for name, code in exits.items() if name != killed)
    manual_once = counts.manual == 1 and trigger.repeat_existed
    overlap_id, (overlap_name, _) = list(schedules.items())[-1]
    overlap_rows = env.history.runs([overlap_id])
    return DemoVerdict(
        ok=counts.exact
        and manual_once
        and at_rest == 0
        and report.ok
        and graceful
        and worker_exit == 0,
        replicas=options.replicas,
        killed_replica=killed,
        schedules=len(schedules),
        window_start_ms=start_ms,
        window_end_ms=end_ms,
        expected=counts.expected,
        admitted=counts.admitted,
        duplicates=counts.duplicates,
        early=counts.early,
        missing=counts.missing,
        unexpected=counts.unexpected,
        lateness_p50_ms=counts.lateness_p50_ms,
        lateness_p99_ms=counts.lateness_p99_ms,
        executed=counts.executed,
        not_executed=counts.not_executed,
        manual_runs=counts.manual,
        manual_executed=counts.manual_executed,
        manual_request_id=trigger.request_id if trigger.sent else None,
        manual_repeat_existed=trigger.repeat_existed,
        overlap_schedule=overlap_name,
        overlap_executed=sum(1 for row in overlap_rows if row.succeeded == 1 and row.live == 0),
        overlap_skipped=counts.overlap_skipped,
        rows_per_run=ROWS_PER_RUN if counts.rows_ok else f"NOT {ROWS_PER_RUN}",
        claims_at_rest=at_rest,
        verify_ok=report.ok,
        violations=[f"{v.rule}: schedule {v.schedule_id}: {v.detail}" for v in report.violations],
        admissions_by_replica=counts.by_owner,
        replica_exit_codes=exits,
        worker_exit_code=worker_exit,
    )


def run_demo(options: DemoOptions) -> DemoVerdict:
    """Run the demo end to end and return its verdict; cleans up everything, also on Ctrl-C."""
    console = Console(stderr=options.as_json)

    def interrupted(_signum: int, _frame: FrameType | None) -> None:
        raise _InterruptedError

    previous = signal.signal(signal.SIGTERM, interrupted)
    # A shell starting us in the background leaves SIGINT ignored; the demo promises to clean
    # up on Ctrl-C, so it takes SIGINT back whatever it inherited.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with (
            demo_database(options.dsn, None if options.as_json else console) as env,
            options.serve(env.observer_dsn, env.admin_dsn)
            if options.serve is not None
            else contextlib.nullcontext(),
        ):
            try:
                verdict = _demo(env, options, console)
            finally:
                for replica in env.processes:
                    if replica.process.poll() is None:
                        replica.process.kill()
                        replica.process.wait()
                env.history.close()
    except _InterruptedError:
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    if options.as_json:
        sys.stdout.write(verdict.model_dump_json() + "\n")
    else:
        show_verdict(verdict, console)
    return verdict


def _demo(env: Environment, options: DemoOptions, console: Console) -> DemoVerdict:
    schedules = _create_schedules(env, options.schedules)
    start_ms = min(first for _, first in schedules.values())
    trigger = _ManualTrigger(options.seconds * 0.6, f"demo-{secrets.token_hex(4)}")
    first_name = next(iter(schedules.values()))[0]
    if not options.as_json:
        console.print(
            f"{len(schedules) - 1} schedules every second; each run executes\n  {DEMO_COMMAND}\n"
            f"and {list(schedules.values())[-1][0]} every second under --overlap skip, running\n"
            f"  {OVERLAP_COMMAND}\n"
            f"{options.replicas} replicas admit and {DEMO_WORKER} executes for"
            f" {options.seconds:g} s; a replica is SIGKILLed at {options.seconds * 0.4:.1f} s;"
            f" at {trigger.at_s:.1f} s {first_name} is triggered by hand twice with one request id"
            f" ({trigger.request_id})"
        )
    killed = _run_replicas(env, options, console, (trigger, first_name))
    end_ms = env.history.database_now_ms() - SETTLE_MS
    _drain(env, schedules, end_ms)
    stop_processes(env.replicas)
    _drain_execution(env, schedules)
    if env.worker is not None:
        stop_processes([env.worker])
    return _verdict(env, schedules, (start_ms, end_ms), options, killed, trigger=trigger)
