"""The in-process `Worker` through database faults, against real PostgreSQL.

Its ingress talks through the wire fault proxy, which swallows the answer of one write (after
the server committed it) or stops every byte. A take whose answer was lost is settled without
using up an attempt, a finish whose answer was lost is found recorded and logged as such, a
transactional task's writes commit exactly once with its success, and a silent database cannot
hold the worker: it reports the fault and stops when asked.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
import pytest
from fix_db import sql_rows, wait_for
from fix_workers import admit_runs, wait_for_states
from ql3_cluster_control import TaskContext, Worker, WorkerSettings
from ql3_cluster_postgres import WorkerIngress
from ql3_runtime_core import TaskExecution
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ql3_runtime_core import AttemptResult, FinishedAttempt, TakenAttempt
    from ql3_testkit import Ql3Database, ThrowawayCluster

ONCE = TaskExecution(max_attempts=1, timeout_ms=60_000, retry_backoff_ms=0)


class LosingIngress(WorkerIngress):
    """The real ingress; the answer to its first take or first finish is lost on the wire."""

    def __init__(self, dsn: str, proxy: WireFaultProxy, lose: str) -> None:
        super().__init__(dsn, max_connections=6)
        self.proxy = proxy
        self.lose = lose

    def _arm(self, call: str, statement: str | None = None) -> None:
        """Lose the answer to the next COMMIT, or to the autocommit `statement` (it commits)."""
        if self.lose == call:
            self.lose = ""
            if statement is None:
                self.proxy.drop_next_commit_reply()
            else:
                self.proxy.drop_next_reply_to(f"-- ql3: {statement}")

    def take_attempts(self, **kwargs: Any) -> list[TakenAttempt]:
        """Take (its own transaction), losing the first answer."""
        self._arm("take")
        return super().take_attempts(**kwargs)

    def finish_attempt(
        self, attempt_id: int, lease_token: Any, result: AttemptResult, *, settle: bool = False
    ) -> FinishedAttempt:
        """Finish (one autocommit statement), losing the first answer."""
        self._arm("finish", "finish_attempt")
        return super().finish_attempt(attempt_id, lease_token, result, settle=settle)


class Running:
    """A worker on a thread of the test, stopped (gracefully) at the end."""

    started: ClassVar[list[Running]] = []

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        Running.started.append(self)

    def _run(self) -> None:
        self.code = self.worker.run()

    def stop(self) -> int | None:
        """Ask for the stop and wait for run() to return (a bound for a hung test)."""
        self.worker.request_stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the worker did not stop"
        return self.code


def _stop_workers() -> None:
    """Stop the workers a test started, also when it failed."""
    while Running.started:
        running = Running.started.pop()
        if running.thread.is_alive():
            running.stop()


@pytest.fixture(autouse=True)
def _workers_stopped() -> Iterator[None]:
    """Leave no worker running after a test."""
    yield
    _stop_workers()


@pytest.fixture
def proxy(pg_cluster: ThrowawayCluster) -> Iterator[WireFaultProxy]:
    """Yield a wire fault proxy in front of the session's cluster (workers stop before it)."""
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as started:
        yield started
        started.heal()
        _stop_workers()


def _worker(
    dsn: str,
    *,
    lose: str = "",
    proxy: WireFaultProxy | None = None,
    **settings: Any,  # WorkerSettings fields
) -> Worker:
    config = WorkerSettings(dsn=dsn, id="svc", run_commands=False, **settings)
    if proxy is None:
        return Worker(config)
    return Worker(config, repository_factory=lambda: LosingIngress(dsn, proxy, lose))


def _events(caplog: pytest.LogCaptureFixture, event: str) -> Sequence[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def test_a_lost_take_answer_burns_no_attempt(
    ql3_db: Ql3Database, proxy: WireFaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Allowed one attempt, the run still executes: the unseen take is settled and handed back."""
    caplog.set_level(logging.INFO)
    runs = admit_runs(ql3_db, {"once": ONCE})
    through = ql3_db.dsn("worker_ingress", port=str(proxy.port))
    worker = _worker(through, lose="take", proxy=proxy, poll_interval_ms=50)
    ran: list[int] = []
    worker.register("once", lambda context: ran.append(context.attempt))
    running = Running(worker)
    # Settled at once, it succeeds within a few polls; unsettled, the attempt would stay held
    # until its lease (30 s by default) expired and then be used up: waiting 20 s tells the two
    # apart without waiting out the lease.
    (attempt,) = wait_for_states(ql3_db, runs["once"], ["succeeded"], timeout_s=20)
    assert running.stop() == 0
    assert proxy.commit_replies_dropped == 1
    assert (attempt["attempt_number"], ran) == (1, [1])
    (settled,) = _events(caplog, "take.settled")
    assert settled.released_attempt_ids == [attempt["id"]]  # type: ignore[attr-defined]


def test_a_lost_finish_answer_is_found_recorded_by_this_worker(
    ql3_db: Ql3Database, proxy: WireFaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """The retried finish finds the success it recorded and says so; nothing is lost."""
    caplog.set_level(logging.INFO)
    runs = admit_runs(ql3_db, {"once": ONCE})
    through = ql3_db.dsn("worker_ingress", port=str(proxy.port))
    # Polls are a minute apart: nothing else commits while the finish is in flight.
    worker = _worker(through, lose="finish", proxy=proxy, poll_interval_ms=60_000)
    worker.register("once", lambda _context: None)
    running = Running(worker)
    wait_for_states(ql3_db, runs["once"], ["succeeded"])
    wait_for(
        lambda: bool(_events(caplog, "attempt.already_recorded")),
        timeout_s=30,
        what="the retried finish found its record",
    )
    assert running.stop() == 0
    (found,) = _events(caplog, "attempt.already_recorded")
    assert found.found == "already recorded succeeded by this worker"  # type: ignore[attr-defined]
    assert not _events(caplog, "attempt.not_recorded")
    registry = worker.metrics.registry
    for outcome, count in (("succeeded", 1), ("lost", 0)):
        sample = registry.get_sample_value("ql3_worker_attempts_total", {"outcome": outcome})
        assert sample == count, outcome


def test_a_transactional_task_writes_exactly_once_with_its_success(ql3_db: Ql3Database) -> None:
    """Its writes commit with the attempt's success; a raising attempt's writes vanish."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.task_counter (n integer NOT NULL)")
        conn.execute("INSERT INTO public.task_counter VALUES (0)")
        conn.execute("GRANT SELECT, UPDATE ON public.task_counter TO ql3_worker_ingress")
    runs = admit_runs(ql3_db, {"count": TaskExecution(max_attempts=2, retry_backoff_ms=0)})
    worker = _worker(ql3_db.dsn("worker_ingress"), poll_interval_ms=50)

    @worker.task("count", transactional=True)
    def count(context: TaskContext) -> None:
        assert context.connection is not None
        context.connection.execute("UPDATE public.task_counter SET n = n + 1")
        if context.attempt == 1:
            msg = "the first attempt breaks after its write"
            raise RuntimeError(msg)

    running = Running(worker)
    first, _ = wait_for_states(ql3_db, runs["count"], ["failed", "succeeded"])
    assert running.stop() == 0
    assert "the first attempt breaks after its write" in first["output_tail"]
    assert sql_rows(ql3_db.superuser_dsn, "SELECT n FROM public.task_counter") == [(1,)]


def test_a_silent_database_is_reported_and_the_stop_still_happens(
    ql3_db: Ql3Database, proxy: WireFaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes stop flowing: the call is cut at its deadline, a fault is logged, run() ends."""
    caplog.set_level(logging.INFO)
    admit_runs(ql3_db, {"idle": ONCE})
    through = ql3_db.dsn("worker_ingress", port=str(proxy.port))
    worker = _worker(through, poll_interval_ms=50, statement_timeout_ms=300, grace_ms=0)
    worker.register("other", lambda _context: None)  # the admitted run is not its task
    running = Running(worker)
    wait_for(lambda: worker.health.connected, timeout_s=30, what="the worker is connected")
    proxy.partition()
    try:
        wait_for(
            lambda: bool(_events(caplog, "worker.fault")),
            timeout_s=30,
            what="the worker reports the silent database",
        )
        assert running.stop() == 0
    finally:
        proxy.heal()
    # Cut mid-call at its deadline, or (checking a pooled connection) no connection in time.
    silent = ("cut the connection", "couldn't get a connection")
    faults = [str(getattr(r, "reason", "")) for r in _events(caplog, "worker.fault")]
    assert any(text in fault for fault in faults for text in silent), faults
