"""The worker: executes admitted runs; leases, timeouts and retries by database time.

One loop thread talks to storage only through `ql3_runtime_core.WorkerRepository` (the
PostgreSQL `WorkerIngress` in production). On each tick, at most every `_TICK_S`:

- every third of (lease - kill margin) it renews the leases of the attempts it runs, in one
  statement (`_slots`), so two renewals may fail before a runner starts killing its command. An
  attempt the database no longer renews (expired by the database clock, or abandoned) is lost: its
  command is killed. A runner whose lease was not confirmed cleanly (a renewal whose answer was
  lost, or acknowledged only with the synchronous-replication WARNING, confirms nothing) ends
  its command on its own `ATTEMPT_KILL_MARGIN_MS` before the database can judge the lease
  expired (measured from when the confirming statement was sent, with `time.monotonic()`; see
  `_attempt_runner`);
- every poll interval (at once when a slot frees up; `_taking`) it marks abandoned the attempts of
  other workers whose lease expired (queuing their successors) and takes as many eligible attempts
  as it has free slots (`concurrency`), oldest eligible first, with SKIP LOCKED. A take that
  failed may have landed unseen (its answer lost) or only on a server being replaced: before
  taking again, the worker settles it from durable facts and hands back, unused, whatever it holds
  without knowing (`settle_taken_attempts`), so a lost answer never burns an attempt;
- each taken attempt runs on a runner thread of its own while it runs (kept and reused,
  `_threads`, so the loop never waits for a new thread to be scheduled), which records its end
  (`_recorder`);
- beside the loop, on its own thread and connection, it LISTENs for `ql3_attempt_queued`
  (`_wakeups`, migration 0015) and makes the loop poll at once when attempts were queued, so an
  idle worker starts new work within a round trip instead of a poll interval; polling stays the
  fallback, and a lost listener only costs that latency until it is back;
- beside the loop, on its own thread and connection, it records the alerts the database clock
  made due and delivers pending alerts (`_alerts`), so `missed` is recorded with no Coordinator.

Stopping (SIGTERM / SIGINT, or `request_stop()`): take nothing more, let running attempts finish
for up to `grace_ms` while their leases are still renewed, then kill what still runs and release
it: the attempt goes back to `queued` with its number, eligible at once (being stopped is not the
task's failure, so no attempt is used up). A second signal ends the grace at once. A worker that
dies instead leaves its attempts to expire by their lease; another worker abandons them. Every
call has a client-side deadline (the ingress's statement timeout + 1 s), so a database gone
silent delays the stop by at most that, never indefinitely.

Database faults never end the loop: log a WARNING, back off with jitter, go on (runners keep
running; leases are kept alive once the database answers again). A schema mismatch stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Final
from uuid import uuid4

from ql3_cluster_postgres import SchemaMismatchError
from ql3_runtime_core import QL3Error, log_event

from ql3_cluster_control._backoff import Backoff
from ql3_cluster_control._config import ConfigurationError, WorkerSettings
from ql3_cluster_control._metrics import HealthState, MetricsServer
from ql3_cluster_control._stop_signals import install_stop_signals

from ._alerts import AlertDispatcher
from ._attempt_runner import KILL_MARGIN_S
from ._ingress import postgres_alert_factory, postgres_ingress_factory, postgres_wakeup_factory
from ._metrics import WorkerMetrics
from ._recorder import AttemptRecorder
from ._release import release_runners
from ._slots import RunnerSlots
from ._taking import AttemptTaker
from ._tasks import TaskRegistry
from ._wakeups import WakeupListener

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_runtime_core import WorkerRepository

    from ._alerts import AlertRepository
    from ._python_runner import TaskFunction
    from ._wakeups import WakeupSource

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

# Longest the loop waits between looks at its runners (self-fence, freed slots, a stop).
_TICK_S: Final = 0.1
# Heartbeats before a runner's kill point: a renewal may fail twice before a command is ended.
_BEATS_PER_LEASE: Final = 3
# The alert duty's shortest interval (`_start_alerts`).
_ALERT_MIN_INTERVAL_S: Final = 0.25


class Worker:
    """Executes the attempts of admitted runs: command tasks, and the Python tasks it registered.

    ```python
    worker = Worker(WorkerSettings(dsn=..., concurrency=2))

    @worker.task("send-report")
    def send_report(context: TaskContext) -> None:
        deliver(key=context.run_id)  # the Run id is the idempotency key

    @worker.task("count-orders", transactional=True)
    def count_orders(context: TaskContext) -> None:
        # Exactly once: these writes commit with the attempt's success, or not at all.
        context.connection.execute("UPDATE app.totals SET n = n + 1")

    worker.run()  # until request_stop() (or SIGTERM once install_signal_handlers() ran)
    ```

    A schedule without a command is a Python task: a worker takes its runs only if it
    registered a callable under the schedule's (task's) name. `run()` returns the exit code.
    """

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        repository_factory: Callable[[], WorkerRepository] | None = None,
        alert_factory: Callable[[], AlertRepository] | None = None,
        wakeup_factory: Callable[[], WakeupSource] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else WorkerSettings()
        self._factory = repository_factory
        self._alert_factory = alert_factory
        self._alerts: AlertDispatcher | None = None
        self._wakeup_factory = wakeup_factory
        self.wakeups: WakeupListener | None = None
        self.lease_token = uuid4()
        self.stop_event = threading.Event()
        self.metrics = WorkerMetrics()
        self.health = HealthState()
        self.backoff = Backoff(
            initial_s=self.settings.retry_initial_ms / 1000,
            maximum_s=self.settings.retry_max_ms / 1000,
        )
        self._tasks = TaskRegistry()
        self._slots = RunnerSlots(self.metrics)
        self._wake = threading.Event()
        self._grace_over = threading.Event()
        self._abort = threading.Event()
        self._repository: WorkerRepository | None = None
        self._recorder = AttemptRecorder(
            self._repository_or_raise, self.lease_token, self.backoff, self._abort
        )
        self._taker = AttemptTaker(
            self.settings,
            self.lease_token,
            slots=self._slots,
            tasks=self._tasks,
            recorder=self._recorder,
            metrics=self.metrics,
            on_done=self._wake.set,
        )
        self._schema_ok = False
        self._signal: str | None = None
        self._metrics_server: MetricsServer | None = None
        self._next_beat = 0.0
        self._next_poll = 0.0
        self._retry_at = 0.0
        self._failures = 0

    @property
    def worker_id(self) -> str:
        """Return the worker's id, recorded on the attempts it holds and in its logs."""
        return self.settings.id

    def register(self, name: str, function: TaskFunction, *, transactional: bool = False) -> None:
        """Run `function` for the runs of the Python task (schedule) called `name`.

        With `transactional`, `function` gets `context.connection`, inside the transaction that
        records the attempt succeeded once it returns: what it writes through that connection
        commits exactly once per succeeded Run (the worker's login needs the grants for it).

        Raises:
            ConfigurationError: a name no schedule can have, a name registered twice, or a
                `function` that is not callable.

        """
        self._tasks.register(name, function, transactional=transactional)

    def task(
        self, name: str, *, transactional: bool = False
    ) -> Callable[[TaskFunction], TaskFunction]:
        """Decorate a callable to run it for the Python task `name` (see `register`)."""

        def decorate(function: TaskFunction) -> TaskFunction:
            self.register(name, function, transactional=transactional)
            return function

        return decorate

    @property
    def task_names(self) -> tuple[str, ...]:
        """The Python tasks this worker runs, sorted."""
        return self._tasks.names

    def request_stop(self) -> None:
        """Stop taking work and begin the graceful stop; a second call ends the grace at once."""
        if self.stop_event.is_set():
            self._grace_over.set()
        self.stop_event.set()
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """Turn SIGTERM and SIGINT into `request_stop()` (main thread only)."""
        install_stop_signals(self._stop_on_signal)

    def _stop_on_signal(self, name: str) -> None:
        self._signal = name
        self.request_stop()

    def run(self) -> int:
        """Execute attempts until stopped; 0 after a graceful stop.

        Raises:
            ConfigurationError: it has nothing to run (no Python task and commands turned off),
                or no database.
            SchemaMismatchError: the database schema is not the version this build expects.

        """
        if not self.settings.run_commands and not self.task_names:
            msg = "nothing to run: register a Python task or let the worker run commands"
            raise ConfigurationError(msg)
        factory = self._factory or postgres_ingress_factory(self.settings)
        self._repository = factory()
        self._start_metrics()
        self._start_alerts()
        self._start_wakeups()
        log_event(
            logger,
            logging.INFO,
            "worker.started",
            worker_id=self.worker_id,
            concurrency=self.settings.concurrency,
            lease_ms=self.settings.lease_ms,
            commands=self.settings.run_commands,
            python_tasks=list(self.task_names),
        )
        try:
            while not self.stop_event.is_set():
                self._tick(taking=True)
                self._wait()
        finally:
            self._shutdown()
        return 0

    def _wait(self) -> None:
        self._wake.wait(_TICK_S)
        self._wake.clear()

    def _tick(self, *, taking: bool) -> None:
        """Watch the runners; talk to the database when something is due and no fault holds it."""
        now = time.monotonic()
        self._reap()
        if now < self._retry_at:
            return
        repository = self._repository_or_raise()
        try:
            self._check_schema(repository)
            if now >= self._next_beat:
                self._next_beat = now + self._beat_s
                self._heartbeat(repository)
            if taking and now >= self._next_poll:
                self._next_poll = now + self.settings.poll_interval_ms / 1000
                self._poll(repository)
            self._failures = 0
            self.health.connected = True
        except SchemaMismatchError:
            self.health.connected, self.health.schema_ok = True, False
            raise
        except QL3Error as exc:
            self._fault(exc)

    def _repository_or_raise(self) -> WorkerRepository:
        if self._repository is None:  # pragma: no cover - run() sets it before the first tick
            msg = "worker: not started"
            raise QL3Error(msg)
        return self._repository

    def _check_schema(self, repository: WorkerRepository) -> None:
        if self._schema_ok:
            return
        version = repository.check_schema()
        self._schema_ok = self.health.schema_ok = self.health.connected = True
        log_event(logger, logging.INFO, "worker.connected", schema_version=version)

    @property
    def _beat_s(self) -> float:
        """Seconds between heartbeats: a third of the lease before a runner's kill point."""
        return (self.settings.lease_ms / 1000 - KILL_MARGIN_S) / _BEATS_PER_LEASE

    def _fault(self, exc: QL3Error) -> None:
        self._failures += 1
        # Never back off past a heartbeat: leases must be renewed as soon as the database answers.
        delay = min(self.backoff.delay_s(self._failures), self._beat_s)
        self._retry_at = time.monotonic() + delay
        self.metrics.database_faults.inc()
        self.health.connected = False
        log_event(
            logger,
            logging.WARNING,
            "worker.fault",
            error=type(exc).__name__,
            reason=str(exc),
            attempt=self._failures,
            retry_in_ms=round(delay * 1000),
        )

    def _heartbeat(self, repository: WorkerRepository) -> None:
        self._slots.renew(repository, self.lease_token, self.settings.lease_ms)

    def _poll(self, repository: WorkerRepository) -> None:
        if self._taker.poll(repository):
            self._next_poll = 0.0  # there may be more: look again once a slot frees up

    def _reap(self) -> None:
        """Forget runners that ended; a freed slot is worth a poll at once."""
        if self._slots.reap():
            self._next_poll = 0.0

    def _shutdown(self) -> None:
        """Let running attempts finish within the grace, then kill and release the rest."""
        log_event(
            logger,
            logging.INFO,
            "worker.stopping",
            signal=self._signal,
            running=len(self._slots.live()),
            grace_ms=self.settings.grace_ms,
        )
        deadline = time.monotonic() + self.settings.grace_ms / 1000
        while self._slots.live() and time.monotonic() < deadline and not self._grace_over.is_set():
            self._safe_tick()
            self._wait()
        live = self._slots.live()
        released = release_runners(self._repository, self.worker_id, self.lease_token, live)
        if self._taker.unsettled and self._repository is not None:
            try:
                self._taker.settle(self._repository)
            except QL3Error as exc:
                # What the lost take gave this worker expires by its lease instead.
                log_event(logger, logging.WARNING, "take.settle_failed", reason=str(exc))
        self._abort.set()
        self._close()
        log_event(logger, logging.INFO, "worker.stopped", released_attempt_ids=released)

    def _safe_tick(self) -> None:
        try:
            self._tick(taking=False)
        except SchemaMismatchError:
            self._grace_over.set()

    def _close(self) -> None:
        self._reap()
        if self._repository is not None:
            try:
                self._repository.close()
            except QL3Error as exc:
                log_event(logger, logging.DEBUG, "worker.close_failed", reason=str(exc))
        if self._metrics_server is not None:
            self._metrics_server.stop()
        if self._alerts is not None:
            self._alerts.stop()
        if self.wakeups is not None:
            self.wakeups.stop()

    def _start_alerts(self) -> None:
        """Record due alerts and deliver them beside the loop (PostgreSQL workers, or if given).

        A worker built on another repository (a test's) has no alert duty unless it is given an
        `alert_factory`: alerts are rows of the PostgreSQL schema.
        """
        factory = self._alert_factory
        if factory is None and self._factory is None:
            factory = postgres_alert_factory(self.settings)
        if factory is None:
            return
        self._alerts = AlertDispatcher(
            factory,
            worker_id=self.worker_id,
            metrics=self.metrics,
            # Every poll, but at most four times a second: a busy fleet polls far more often.
            interval_s=max(self.settings.poll_interval_ms / 1000, _ALERT_MIN_INTERVAL_S),
        ).start()

    def _start_wakeups(self) -> None:
        """LISTEN beside the loop (PostgreSQL workers with `listen`, or when given a factory).

        A worker built on another repository (a test's) polls only, unless given a
        `wakeup_factory`: the notification is sent by the PostgreSQL schema.
        """
        factory = self._wakeup_factory
        if factory is None and self._factory is None and self.settings.listen:
            factory = postgres_wakeup_factory(self.settings)
        if factory is None:
            return
        self.wakeups = WakeupListener(
            factory, wake=self._poll_now, backoff=self.backoff, worker_id=self.worker_id
        ).start()

    def _poll_now(self) -> None:
        """Poll at the next tick and make that tick now: attempts were queued."""
        self._next_poll = 0.0
        self._wake.set()

    def _start_metrics(self) -> None:
        if self.settings.metrics_port is None:
            return
        self._metrics_server = MetricsServer(
            self.metrics,
            self.health,
            host=self.settings.metrics_host,
            port=self.settings.metrics_port,
        ).start()
        log_event(logger, logging.INFO, "metrics.serving", port=self._metrics_server.port)
