"""Real `ql3 worker` processes in chaos scenarios, and the execution verdict (DESIGN §10).

A `WorkerProcess` is to `ql3 worker` what `Replica` is to `ql3 run`: a real process with JSON
logs in the scenario's folder. `judge_execution` reads every attempt back from the database once
nothing is queued or running any more, and requires of each Run: attempts numbered 1..n; exactly
one `succeeded`, the last (or, for a schedule whose command always fails, none and all
`max_attempts` used); every attempt that did not succeed followed by a successor unless it was
the last one allowed (so none abandoned without a successor); each successor created no earlier
than its predecessor ended, and never before its `not_before_ms` (so two attempts of one Run were
never live at once, and retries waited out their backoff by the database clock). The partial
UNIQUE index that makes the database refuse a second live attempt must be in place and valid.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness import LoggedProcess, ql3_executable, wait_until

if TYPE_CHECKING:
    from collections.abc import Iterable

    from harness import Scenario

WORKER_POLL_MS = 100
# A worker process that runs one transactional Python task (chaos/transactional_worker.py).
TRANSACTIONAL_WORKER = Path(__file__).resolve().parent / "transactional_worker.py"
ATTEMPTS_SQL = (
    "SELECT a.id, a.run_id, a.attempt_number, a.state, a.worker_id, a.exit_code,"
    " a.created_at_ms, a.not_before_ms, a.started_at_ms, a.finished_at_ms,"
    " r.schedule_id, k.max_attempts"
    " FROM ql3.attempts AS a JOIN ql3.runs AS r ON r.id = a.run_id"
    " JOIN ql3.tasks AS k ON k.id = r.task_id ORDER BY a.run_id, a.attempt_number"
)
ATTEMPT_COLUMNS = (
    "id", "run_id", "number", "state", "worker_id", "exit_code", "created_at_ms",
    "not_before_ms", "started_at_ms", "finished_at_ms", "schedule_id", "max_attempts",
)  # fmt: skip
LIVE_SQL = "SELECT count(*) FROM ql3.attempts WHERE state IN ('queued', 'running')"
ONE_LIVE_INDEX_SQL = (
    "SELECT i.indisunique AND i.indisvalid AND pg_get_expr(i.indpred, i.indrelid) IS NOT NULL"
    " FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
    " WHERE c.relname = 'attempts_one_live'"
)
ENDED = ("failed", "timed_out", "abandoned")


@dataclass
class WorkerProcess(LoggedProcess):
    """One `ql3 worker` process (login of ql3_worker_ingress) with JSON logs in a file.

    With `python_task`, the process is instead a service running that one transactional Python
    task with `ql3_cluster_control.Worker` (chaos/transactional_worker.py), same settings.
    """

    worker_id: str
    dsn: str
    log_path: Path
    cwd: Path
    lease_ms: int
    concurrency: int = 4
    grace_ms: int = 5_000
    python_task: str | None = None
    process: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    # Running attempts finish within the grace before the worker exits.
    stop_timeout_s: ClassVar[float] = 30

    def start(self) -> WorkerProcess:
        """Start the process (the DSN travels in QL3_WORKER_DSN, not on the command line)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
        env["QL3_WORKER_DSN"] = self.dsn
        env["QL3_WORKER_APPLICATION_NAME"] = self.worker_id[:63]
        program = [str(ql3_executable()), "worker"]
        if self.python_task is not None:
            program = [sys.executable, str(TRANSACTIONAL_WORKER), self.python_task]
        argv = [
            *program,
            "--worker-id", self.worker_id,
            "--lease-ms", str(self.lease_ms),
            "--concurrency", str(self.concurrency),
            "--grace-ms", str(self.grace_ms),
            "--poll-interval-ms", str(WORKER_POLL_MS),
            "--log-format", "json",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd
            )
        return self

    def wait_ready(self, timeout_s: float = 30) -> None:
        """Wait until the worker connected and checked the schema (its log says so)."""
        wait_until(
            lambda: bool(self.events("worker.connected")),
            timeout_s=timeout_s,
            what=f"worker {self.worker_id} is connected",
        )

    def tail(self, lines: int = 15) -> str:
        """Return the end of the log, for failure messages."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Workers:
    """The `ql3 worker` processes of one scenario; leftovers are killed at its tear-down."""

    run: Scenario
    started: list[WorkerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.run.on_close(self.kill_all)

    def start(
        self,
        *,
        lease_ms: int,
        concurrency: int = 4,
        dsn: str | None = None,
        python_task: str | None = None,
    ) -> WorkerProcess:
        """Start a worker named after the scenario; wait until it is connected.

        `dsn` replaces the worker login's own (say, through a fault proxy); `python_task` makes
        it a service running that transactional Python task instead of `ql3 worker`.
        """
        name = f"{self.run.evidence.scenario}-w{len(self.started) + 1}"
        worker = WorkerProcess(
            worker_id=name,
            dsn=dsn or self.run.dsn("worker_ingress"),
            log_path=self.run.workdir / f"{name}.log",
            cwd=self.run.workdir,
            lease_ms=lease_ms,
            concurrency=concurrency,
            python_task=python_task,
        )
        self.started.append(worker.start())
        try:
            worker.wait_ready()
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{worker.tail()}") from None
        return worker

    def stop_all(self) -> None:
        """Stop every live worker gracefully and require exit code 0."""
        codes = {w.worker_id: w.stop() for w in self.started if w.alive}
        bad = {name: code for name, code in codes.items() if code != 0}
        assert not bad, f"workers did not stop cleanly: {bad}\n{self.logs()}"

    def kill_all(self) -> None:
        """Kill whatever still runs (tear-down)."""
        for worker in self.started:
            if worker.alive:
                with contextlib.suppress(Exception):
                    worker.kill()

    def logs(self) -> str:
        """Tails of every worker log, for failure messages."""
        return "\n".join(
            f"--- {w.worker_id} (alive={w.alive}, exit={w.exit_code}) ---\n{w.tail()}"
            for w in self.started
        )

    def count(self, event: str) -> int:
        """How many log records of kind `event` all the workers wrote."""
        return sum(len(w.events(event)) for w in self.started)


def attempts(run: Scenario) -> list[dict[str, Any]]:
    """Every attempt with its run's schedule and its task's max_attempts, by run and number."""
    return [dict(zip(ATTEMPT_COLUMNS, row, strict=True)) for row in run.fetch_admin(ATTEMPTS_SQL)]


def wait_settled(run: Scenario, workers: Workers, timeout_s: float) -> float:
    """Wait until no attempt is queued or running (every Run has reached its end)."""
    try:
        return wait_until(
            lambda: int(run.fetch_admin(LIVE_SQL)[0][0]) == 0,
            timeout_s=timeout_s,
            what="no attempt is queued or running",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{workers.logs()}") from None


@dataclass(frozen=True)
class ExecutionVerdict:
    """What `judge_execution` found: runs by how they ended, attempts by state."""

    runs: int
    succeeded_once: int
    exhausted: int
    states: dict[str, int]

    def summary(self) -> str:
        """One line for the evidence row."""
        states = ", ".join(f"{state} {n}" for state, n in sorted(self.states.items()))
        return (
            f"{self.runs} runs: {self.succeeded_once} succeeded once, {self.exhausted} exhausted"
            f" their attempts; attempts: {states}"
        )


def _check_run(tries: list[dict[str, Any]], *, exhausts: bool) -> bool:
    """Check one Run's attempts (see the module docstring); True when it exhausted them."""
    run_id, limit = tries[0]["run_id"], tries[0]["max_attempts"]
    states = [a["state"] for a in tries]
    assert [a["number"] for a in tries] == list(range(1, len(tries) + 1)), (run_id, tries)
    assert len(tries) <= limit, f"run {run_id}: {len(tries)} attempts, max {limit}"
    for before, after in itertools.pairwise(tries):
        assert before["state"] in ENDED, f"run {run_id}: successor after {before['state']}"
        assert after["created_at_ms"] >= before["finished_at_ms"], (
            f"run {run_id}: attempt {after['number']} created before {before['number']} ended"
        )
        started, not_before = after["started_at_ms"], after["not_before_ms"]
        assert not_before is not None, f"run {run_id}: a retry without not_before_ms"
        assert started is None or started >= not_before, f"run {run_id}: retried early"
    if exhausts:
        assert len(tries) == limit, f"run {run_id}: gave up after {states}, max {limit}"
        assert all(state in ENDED for state in states), f"run {run_id}: {states}"
        return True
    assert states.count("succeeded") == 1, f"run {run_id}: {states}"
    assert states[-1] == "succeeded", f"run {run_id}: {states}"
    return False


def judge_execution(run: Scenario, *, exhausting: Iterable[int] = ()) -> ExecutionVerdict:
    """Judge every Run's attempts from the database (nothing may be live); record the result.

    `exhausting` are the schedules whose command always fails: their runs must use all their
    attempts and succeed none.
    """
    always_fails = set(exhausting)
    assert run.fetch_superuser(ONE_LIVE_INDEX_SQL) == [(True,)], "attempts_one_live is missing"
    every = attempts(run)
    by_run: dict[int, list[dict[str, Any]]] = {}
    for attempt in every:
        by_run.setdefault(attempt["run_id"], []).append(attempt)
    admitted = run.runs_count()
    assert len(by_run) == admitted, f"{admitted - len(by_run)} runs without an attempt"
    exhausted = sum(
        _check_run(tries, exhausts=tries[0]["schedule_id"] in always_fails)
        for tries in by_run.values()
    )
    verdict = ExecutionVerdict(
        runs=len(by_run),
        succeeded_once=len(by_run) - exhausted,
        exhausted=exhausted,
        states=dict(Counter(a["state"] for a in every)),
    )
    run.note(verdict.summary())
    return verdict
