"""An idle worker takes new work when it is queued, not at its next poll (DESIGN §10).

The worker LISTENs for `ql3_attempt_queued` (migration 0015) on one extra connection. With a
poll interval of a minute, an admitted Run is taken long before the next poll could have fired;
with the listening connection killed (pg_terminate_backend) polling still takes the work, and
the listener comes back on a new connection. Everything asserted is read from the database or
from the worker's own state; no wall-clock bound beyond "before the next poll was due".
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest
from fix_db import sql_rows, wait_for
from fix_workers import admit_runs, wait_for_states
from ql3_cluster_control import TaskContext, Worker, WorkerSettings
from ql3_cluster_postgres import AttemptWakeups
from ql3_runtime_core import RepositoryUnavailableError, TaskExecution

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

_LONG_POLL_MS = 60_000


class _Running:
    """A worker on a thread of the test, stopped gracefully at the end."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.request_stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()


@pytest.fixture
def started() -> Iterator[list[_Running]]:
    """Collect the workers a test starts; each is stopped at the end."""
    running: list[_Running] = []
    yield running
    for each in running:
        if each.thread.is_alive():
            each.stop()


def _quiet(worker: Worker) -> float:
    """Wait until the worker listens and its next poll is far off; when that poll is due."""

    def settled() -> bool:
        wakeups = worker.wakeups
        return (
            wakeups is not None
            and wakeups.listening.is_set()
            and wakeups.wakeups >= 1  # the wake after connecting has been handed to the loop
            and worker._next_poll > time.monotonic() + _LONG_POLL_MS / 2000
            and not worker._slots.live()
        )

    wait_for(settled, timeout_s=30, what="the worker listening with its next poll far off")
    return worker._next_poll


def test_an_admitted_run_is_taken_before_the_next_poll_could_fire(
    ql3_db: Ql3Database, started: list[_Running]
) -> None:
    """Poll interval 60 s: the Run admitted while the worker idles succeeds well before it."""
    worker = Worker(
        WorkerSettings(
            dsn=ql3_db.dsn("worker_ingress"),
            id="listener",
            poll_interval_ms=_LONG_POLL_MS,
            run_commands=False,
        )
    )
    seen: list[int] = []

    @worker.task("quick")
    def quick(context: TaskContext) -> None:
        seen.append(context.run_id)

    started.append(_Running(worker))
    next_poll = _quiet(worker)
    runs = admit_runs(ql3_db, {"quick": TaskExecution()})
    remaining = next_poll - time.monotonic()
    assert remaining > 0, "the admission itself outlasted the poll interval"
    (attempt,) = wait_for_states(ql3_db, runs["quick"], ["succeeded"], timeout_s=remaining - 1)
    assert seen == [runs["quick"]]
    (admitted_at_ms,) = sql_rows(
        ql3_db.superuser_dsn, "SELECT created_at_ms FROM ql3.runs WHERE id = %s", (runs["quick"],)
    )[0]
    # By the database clock too: taken well inside the poll interval after its admission.
    assert attempt["started_at_ms"] - admitted_at_ms < _LONG_POLL_MS / 2


class _HeldDown(AttemptWakeups):
    """The real listener, kept from reconnecting while `allow` is clear (the test's switch)."""

    def __init__(self, dsn: str, allow: threading.Event) -> None:
        super().__init__(dsn, application_name="wakeup-test-listen")
        self.allow = allow

    def wait(self, timeout_s: float) -> bool:
        if self.backend_pid is None and not self.allow.is_set():
            msg = "wakeups: kept from reconnecting by the test"
            raise RepositoryUnavailableError(msg)
        return super().wait(timeout_s)


def _listener_pids(db: Ql3Database) -> list[int]:
    return [
        int(pid)
        for (pid,) in sql_rows(
            db.superuser_dsn,
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'wakeup-test-listen'",
        )
    ]


def test_a_killed_listener_leaves_polling_to_take_the_work_then_comes_back(
    ql3_db: Ql3Database, started: list[_Running]
) -> None:
    """pg_terminate_backend on the listener: the worker goes on polling, then listens again."""
    allow = threading.Event()
    allow.set()
    worker = Worker(
        WorkerSettings(
            dsn=ql3_db.dsn("worker_ingress"),
            id="poller",
            poll_interval_ms=200,
            run_commands=False,
            retry_max_ms=1_000,
        ),
        wakeup_factory=lambda: _HeldDown(ql3_db.dsn("worker_ingress"), allow),
    )
    done = threading.Event()
    worker.register("after-loss", lambda _context: done.set())
    started.append(_Running(worker))
    wait_for(
        lambda: worker.wakeups is not None and worker.wakeups.listening.is_set(),
        timeout_s=30,
        what="the listener connected",
    )
    listener = worker.wakeups
    assert listener is not None
    (first_pid,) = _listener_pids(ql3_db)

    allow.clear()
    sql_rows(ql3_db.superuser_dsn, "SELECT pg_terminate_backend(%s)", (first_pid,))
    wait_for(lambda: not listener.listening.is_set(), timeout_s=30, what="the listener lost")
    assert _listener_pids(ql3_db) == []

    runs = admit_runs(ql3_db, {"after-loss": TaskExecution()})
    wait_for_states(ql3_db, runs["after-loss"], ["succeeded"], timeout_s=30)
    assert done.is_set()
    assert not listener.listening.is_set(), "polling, not the listener, took the work"
    assert started[0].thread.is_alive()

    allow.set()
    wait_for(listener.listening.is_set, timeout_s=30, what="the listener back")
    (second_pid,) = _listener_pids(ql3_db)
    assert second_pid != first_pid
