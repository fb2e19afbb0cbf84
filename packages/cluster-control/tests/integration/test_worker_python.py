"""Python tasks run by `Worker` in-process, against real PostgreSQL (DESIGN §10).

A consuming service registers callables by task name; the worker takes only the runs it can
run and hands each callable the Run id as its idempotency key. Outcomes are read back from the
database.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest
from fix_db import wait_for
from fix_workers import admit_runs, attempts_of, wait_for_states
from ql3_cluster_control import ConfigurationError, TaskContext, Worker, WorkerSettings
from ql3_runtime_core import TaskExecution

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database


class Running:
    """A worker running on a thread of the test; stopped (gracefully) at the end."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.code = self.worker.run()

    def stop(self) -> int | None:
        """Stop the worker gracefully; its exit code."""
        self.worker.request_stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.code


@pytest.fixture
def start_worker() -> Iterator[list[Running]]:
    """Collect workers a test starts; each is stopped at the end."""
    started: list[Running] = []
    yield started
    for running in started:
        if running.thread.is_alive():
            running.stop()


def _worker(db: Ql3Database, **settings: object) -> Worker:
    return Worker(
        WorkerSettings(
            dsn=db.dsn("worker_ingress"),
            id="svc",
            poll_interval_ms=50,
            **settings,  # type: ignore[arg-type]
        )
    )


def _run(started: list[Running], worker: Worker) -> Running:
    running = Running(worker)
    running.thread.start()
    started.append(running)
    return running


def test_a_registered_callable_gets_the_run_as_its_idempotency_key(
    ql3_db: Ql3Database, start_worker: list[Running]
) -> None:
    """The callable runs once with run id, attempt, occurrence and payload; the run succeeds."""
    runs = admit_runs(ql3_db, {"report": TaskExecution()})
    seen: list[TaskContext] = []
    worker = _worker(ql3_db, run_commands=False)

    @worker.task("report")
    def report(context: TaskContext) -> None:
        seen.append(context)

    running = _run(start_worker, worker)
    (attempt,) = wait_for_states(ql3_db, runs["report"], ["succeeded"])
    assert running.stop() == 0
    (context,) = seen
    assert (context.run_id, context.attempt, context.attempt_id) == (
        runs["report"],
        1,
        attempt["id"],
    )
    assert (context.task_name, context.payload, context.worker_id) == ("report", {"n": 0}, "svc")
    assert context.scheduled_for_ms > 0
    assert attempt["exit_code"] is None


def test_a_raising_callable_fails_and_is_retried(
    ql3_db: Ql3Database, start_worker: list[Running]
) -> None:
    """An exception fails the attempt with its traceback's tail; the retry then succeeds."""
    execution = TaskExecution(max_attempts=2, retry_backoff_ms=0)
    runs = admit_runs(ql3_db, {"flaky": execution})
    worker = _worker(ql3_db, run_commands=False)

    def flaky(context: TaskContext) -> None:
        if context.attempt == 1:
            msg = "first attempt breaks"
            raise RuntimeError(msg)

    worker.register("flaky", flaky)
    _run(start_worker, worker)
    first, _ = wait_for_states(ql3_db, runs["flaky"], ["failed", "succeeded"])
    assert first["output_tail"].endswith("RuntimeError: first attempt breaks\n")
    assert "Traceback" in first["output_tail"]


def test_a_python_timeout_is_recorded_and_the_callable_asked_to_stop(
    ql3_db: Ql3Database, start_worker: list[Running]
) -> None:
    """Past its timeout the attempt is timed_out at once and `cancelled` tells the callable."""
    runs = admit_runs(ql3_db, {"slow": TaskExecution(max_attempts=1, timeout_ms=1_000)})
    worker = _worker(ql3_db, run_commands=False)
    noticed = threading.Event()

    @worker.task("slow")
    def slow(context: TaskContext) -> None:
        if context.cancelled.wait(60):
            noticed.set()

    _run(start_worker, worker)
    (attempt,) = wait_for_states(ql3_db, runs["slow"], ["timed_out"])
    wait_for(noticed.is_set, timeout_s=10, what="the callable saw cancelled")
    assert attempt["finished_at_ms"] - attempt["started_at_ms"] >= 1_000
    assert "context.cancelled" in attempt["output_tail"]


def test_a_worker_takes_only_the_tasks_it_can_run(
    ql3_db: Ql3Database, start_worker: list[Running]
) -> None:
    """A Python task nobody registered and a command (commands off) stay queued."""
    runs = admit_runs(
        ql3_db,
        {
            "mine": TaskExecution(),
            "theirs": TaskExecution(),
            "shell": TaskExecution(command="true"),
        },
    )
    worker = _worker(ql3_db, run_commands=False)
    worker.register("mine", lambda _context: None)
    _run(start_worker, worker)
    wait_for_states(ql3_db, runs["mine"], ["succeeded"])
    start_worker[0].stop()
    assert [a["state"] for a in attempts_of(ql3_db, runs["theirs"])] == ["queued"]
    assert [a["state"] for a in attempts_of(ql3_db, runs["shell"])] == ["queued"]


def test_registration_is_checked() -> None:
    """Bad names, twice the same name, a non-callable and nothing to run are refused by name."""
    worker = Worker(WorkerSettings(dsn="host=localhost", run_commands=False))
    with pytest.raises(ConfigurationError, match="nothing to run"):
        worker.run()
    worker.register("a", lambda _context: None)
    with pytest.raises(ConfigurationError, match="task 'a': a callable is registered already"):
        worker.register("a", lambda _context: None)
    with pytest.raises(ConfigurationError, match="task name: printable"):
        worker.register(" padded", lambda _context: None)
    with pytest.raises(ConfigurationError, match=r"task name: 1\.\.200"):
        worker.register("x" * 201, lambda _context: None)
    with pytest.raises(ConfigurationError, match="is not callable"):
        worker.register("b", "not a function")  # type: ignore[arg-type]
    assert worker.task_names == ("a",)
