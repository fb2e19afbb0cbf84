"""The worker (issue 13): executes admitted runs; leases, timeouts and retries by database time.

One loop thread talks to storage only through `ql3_runtime_core.WorkerRepository` (the
PostgreSQL `WorkerIngress` in production). On each tick, at most every `_TICK_S`:

- every third of the lease it renews the leases of the attempts it runs, in one statement. An
  attempt the database no longer renews (expired by the database clock, or abandoned) is lost:
  its command is killed. A runner whose lease was not confirmed for a whole lease (the database
  unreachable) gives up on its own, before the database can judge the lease expired (measured
  from when the confirming statement was sent, with `time.monotonic()`; see `_attempt_runner`),
  so another worker rarely runs a Run while this one still does;
- every poll interval (at once when a slot frees up) it marks abandoned the attempts of other
  workers whose lease expired (queuing their successors) and takes as many eligible attempts
  as it has free slots (`concurrency`), oldest eligible first, with SKIP LOCKED;
- each taken attempt runs on its own runner thread (`_attempt_runner`), which records its end.

Stopping (SIGTERM / SIGINT, or `request_stop()`): take nothing more, let running attempts finish
for up to `grace_ms` while their leases are still renewed, then kill what still runs and release
it: the attempt goes back to `queued` with its number, eligible at once (being stopped is not the
task's failure, so no attempt is used up). A second signal ends the grace at once. A worker that
dies instead leaves its attempts to expire by their lease; another worker abandons them.

Database faults never end the loop: log a WARNING, back off with jitter, go on (runners keep
running; leases are kept alive once the database answers again). A schema mismatch stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Final
from uuid import uuid4

from ql3_cluster_postgres import SCHEDULE_NAME_MAX_LENGTH, SchemaMismatchError, WorkerIngress
from ql3_runtime_core import AttemptResult, QL3Error, RepositoryUnavailableError

from ._attempt_runner import KILL_GRACE_S, AttemptRunner, CommandRunner, PythonRunner
from ._backoff import Backoff
from ._config import ConfigurationError
from ._metrics import HealthState, MetricsServer
from ._stop_signals import install_stop_signals
from ._worker_config import WorkerSettings
from ._worker_metrics import WorkerMetrics

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ql3_runtime_core import FinishedAttempt, TakenAttempt, WorkerRepository

    from ._attempt_runner import TaskFunction

__all__ = ["Worker", "postgres_ingress_factory"]

logger = logging.getLogger(__name__)

# Longest the loop waits between looks at its runners (self-fence, freed slots, a stop).
_TICK_S: Final = 0.1
# Expired leases handled per poll; more wait for the next one.
_ABANDON_BATCH: Final = 100
# Heartbeats per lease: a renewal may fail twice before the lease runs out.
_BEATS_PER_LEASE: Final = 3


def postgres_ingress_factory(settings: WorkerSettings) -> Callable[[], WorkerRepository]:
    """Return a factory of the PostgreSQL ingress for `settings` (a pooled connection per slot)."""
    dsn = settings.dsn_value()
    if dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_WORKER_DSN or QL3_DSN"
        raise ConfigurationError(msg)

    def build() -> WorkerRepository:
        return WorkerIngress(
            dsn,
            application_name=settings.application_name,
            max_connections=settings.concurrency + 1,
            connect_timeout_s=settings.connect_timeout_s,
        )

    return build


def _check_task_name(name: str) -> None:
    if not 1 <= len(name) <= SCHEDULE_NAME_MAX_LENGTH:
        msg = f"task name: 1..{SCHEDULE_NAME_MAX_LENGTH} characters, got {len(name)}"
        raise ConfigurationError(msg)
    if name != name.strip() or not name.isprintable():
        msg = f"task name: printable, without outer whitespace, got {name!r}"
        raise ConfigurationError(msg)


class Worker:
    """Executes the attempts of admitted runs: command tasks, and the Python tasks it registered.

    ```python
    worker = Worker(WorkerSettings(dsn=..., concurrency=2))

    @worker.task("send-report")
    def send_report(context: TaskContext) -> None:
        deliver(key=context.run_id)  # the Run id is the idempotency key

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
    ) -> None:
        self.settings = settings if settings is not None else WorkerSettings()
        self._factory = repository_factory
        self.lease_token = uuid4()
        self.stop_event = threading.Event()
        self.metrics = WorkerMetrics()
        self.health = HealthState()
        self.backoff = Backoff(
            initial_s=self.settings.retry_initial_ms / 1000,
            maximum_s=self.settings.retry_max_ms / 1000,
        )
        self._tasks: dict[str, TaskFunction] = {}
        self._runners: dict[int, AttemptRunner] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._grace_over = threading.Event()
        self._abort = threading.Event()
        self._repository: WorkerRepository | None = None
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

    # -- registration ---------------------------------------------------------------------------

    def register(self, name: str, function: TaskFunction) -> None:
        """Run `function` for the runs of the Python task (schedule) called `name`.

        Raises:
            ConfigurationError: a name no schedule can have, a name registered twice, or a
                `function` that is not callable.

        """
        _check_task_name(name)
        if not callable(function):
            msg = f"task {name!r}: {function!r} is not callable"
            raise ConfigurationError(msg)
        with self._lock:
            if name in self._tasks:
                msg = f"task {name!r}: a callable is registered already"
                raise ConfigurationError(msg)
            self._tasks[name] = function

    def task(self, name: str) -> Callable[[TaskFunction], TaskFunction]:
        """Decorate a callable to run it for the Python task `name` (see `register`)."""

        def decorate(function: TaskFunction) -> TaskFunction:
            self.register(name, function)
            return function

        return decorate

    @property
    def task_names(self) -> tuple[str, ...]:
        """The Python tasks this worker runs, sorted."""
        with self._lock:
            return tuple(sorted(self._tasks))

    # -- stopping -------------------------------------------------------------------------------

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

    # -- the loop -------------------------------------------------------------------------------

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
        logger.info(
            "worker starting",
            extra={
                "event": "worker.started",
                "worker_id": self.worker_id,
                "concurrency": self.settings.concurrency,
                "lease_ms": self.settings.lease_ms,
                "commands": self.settings.run_commands,
                "python_tasks": list(self.task_names),
            },
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
                self._next_beat = now + self.settings.lease_ms / 1000 / _BEATS_PER_LEASE
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
        self._schema_ok = self.health.schema_ok = True
        logger.info(
            "connected; schema version %d",
            version,
            extra={"event": "worker.connected", "schema_version": version},
        )

    def _fault(self, exc: QL3Error) -> None:
        self._failures += 1
        # Never back off past a heartbeat: leases must be renewed as soon as the database answers.
        beat_s = self.settings.lease_ms / 1000 / _BEATS_PER_LEASE
        delay = min(self.backoff.delay_s(self._failures), beat_s)
        self._retry_at = time.monotonic() + delay
        self.metrics.database_faults.inc()
        self.health.connected = False
        logger.warning(
            "database fault, retrying in %.2f s: %s",
            delay,
            exc,
            extra={
                "event": "worker.fault",
                "error": type(exc).__name__,
                "attempt": self._failures,
                "retry_in_ms": round(delay * 1000),
            },
        )

    # -- leases ---------------------------------------------------------------------------------

    def _live(self) -> list[AttemptRunner]:
        """Runners whose attempt still needs its lease."""
        with self._lock:
            return [r for r in self._runners.values() if not r.settled.is_set()]

    def _heartbeat(self, repository: WorkerRepository) -> None:
        live = self._live()
        if not live:
            return
        sent_at = time.monotonic()
        renewed = repository.renew_leases(
            self.lease_token, [r.attempt.attempt_id for r in live], self.settings.lease_ms
        )
        for runner in live:
            if runner.attempt.attempt_id in renewed:
                runner.lease_confirmed_at = sent_at
            elif not runner.settled.is_set():
                runner.lose("the database no longer renews its lease (expired or ended)")

    # -- taking and abandoning ------------------------------------------------------------------

    def _poll(self, repository: WorkerRepository) -> None:
        for abandoned in repository.abandon_expired_attempts(_ABANDON_BATCH):
            self.metrics.abandoned.inc()
            logger.info(
                "attempt %d of worker %s abandoned: its lease expired",
                abandoned.attempt_id,
                abandoned.worker_id,
                extra={
                    "event": "attempt.abandoned",
                    "attempt_id": abandoned.attempt_id,
                    "run_id": abandoned.run_id,
                    "attempt": abandoned.attempt_number,
                    "holder": abandoned.worker_id,
                    "lease_expired_at_ms": abandoned.lease_expired_at_ms,
                    "abandoned_at_ms": abandoned.abandoned_at_ms,
                    "next_attempt_id": abandoned.next_attempt_id,
                    "next_not_before_ms": abandoned.next_not_before_ms,
                },
            )
        free = self.settings.concurrency - self._busy()
        if free <= 0:
            return
        sent_at = time.monotonic()
        taken = repository.take_attempts(
            worker_id=self.worker_id,
            lease_token=self.lease_token,
            lease_ms=self.settings.lease_ms,
            limit=free,
            python_tasks=self.task_names,
            commands=self.settings.run_commands,
        )
        for attempt in taken:
            self._start(attempt, sent_at)
        if len(taken) == free:
            self._next_poll = 0.0  # there may be more: look again once a slot frees up

    def _busy(self) -> int:
        with self._lock:
            return len(self._runners)

    def _start(self, attempt: TakenAttempt, confirmed_at: float) -> None:
        self.metrics.observe_taken(attempt.queue_delay_ms)
        logger.info(
            "attempt %d taken (run %d, attempt %d of %s)",
            attempt.attempt_id,
            attempt.run_id,
            attempt.attempt_number,
            attempt.task_name,
            extra={
                "event": "attempt.taken",
                **_ids(attempt),
                "queue_delay_ms": attempt.queue_delay_ms,
                "lease_expires_at_ms": attempt.lease_expires_at_ms,
            },
        )
        runner: AttemptRunner
        if attempt.execution.command is not None:
            runner = CommandRunner(
                attempt,
                worker_id=self.worker_id,
                record=self._record,
                on_done=self._wake.set,
                confirmed_at=confirmed_at,
                lease_s=self.settings.lease_ms / 1000,
            )
        else:
            runner = PythonRunner(
                attempt,
                self._function(attempt.task_name),
                worker_id=self.worker_id,
                record=self._record,
                on_done=self._wake.set,
                confirmed_at=confirmed_at,
                lease_s=self.settings.lease_ms / 1000,
            )
        with self._lock:
            self._runners[attempt.attempt_id] = runner
            self.metrics.running.set(len(self._runners))
        runner.start()

    def _function(self, name: str) -> TaskFunction:
        with self._lock:
            function = self._tasks.get(name)
        if function is not None:
            return function

        def unregistered(_context: object) -> None:  # pragma: no cover - take filters by name
            msg = f"no callable registered for task {name!r} on worker {self.worker_id!r}"
            raise LookupError(msg)

        return unregistered

    def _reap(self) -> None:
        """Forget runners that ended (their slot is free again)."""
        with self._lock:
            for attempt_id in [i for i, r in self._runners.items() if r.done.is_set()]:
                runner = self._runners.pop(attempt_id)
                if runner.outcome is not None:
                    self.metrics.observe_outcome(runner.outcome)
                self._next_poll = 0.0
            self.metrics.running.set(len(self._runners))

    # -- recording ------------------------------------------------------------------------------

    def _record(self, runner: AttemptRunner, result: AttemptResult) -> None:
        """Record how `runner`'s attempt ended, retrying through database faults until it stops."""
        finished = self._finish(runner.attempt, result)
        attempt = runner.attempt
        if finished is not None and finished.recorded:
            runner.outcome = result.outcome.value
            logger.info(
                "attempt %d %s (run %d, attempt %d of %s)",
                attempt.attempt_id,
                result.outcome.value,
                attempt.run_id,
                attempt.attempt_number,
                attempt.task_name,
                extra={
                    "event": "attempt.finished",
                    **_ids(attempt),
                    "outcome": result.outcome.value,
                    "exit_code": result.exit_code,
                    "finished_at_ms": finished.finished_at_ms,
                    "next_attempt_id": finished.next_attempt_id,
                    "next_not_before_ms": finished.next_not_before_ms,
                },
            )
            return
        runner.outcome = "lost"
        found = None if finished is None or finished.state_found is None else finished.state_found
        logger.warning(
            "attempt %d ended %s but was not recorded: it is no longer ours (%s)",
            attempt.attempt_id,
            result.outcome.value,
            found or "database unreachable",
            extra={
                "event": "attempt.not_recorded",
                **_ids(attempt),
                "outcome": result.outcome.value,
                "state_found": found,
            },
        )

    def _finish(self, attempt: TakenAttempt, result: AttemptResult) -> FinishedAttempt | None:
        failures = 0
        while True:
            try:
                return self._repository_or_raise().finish_attempt(
                    attempt.attempt_id, self.lease_token, result
                )
            except RepositoryUnavailableError as exc:
                failures += 1
                delay = self.backoff.delay_s(failures)
                logger.warning(
                    "attempt %d: cannot record its end yet, retrying in %.2f s: %s",
                    attempt.attempt_id,
                    delay,
                    exc,
                    extra={"event": "attempt.record_retry", **_ids(attempt)},
                )
                if self._abort.wait(delay):
                    return None
            except QL3Error as exc:
                logger.error(  # noqa: TRY400  # one line; the lease settles it
                    "attempt %d: cannot record its end: %s; its lease will expire",
                    attempt.attempt_id,
                    exc,
                    extra={"event": "attempt.record_failed", **_ids(attempt)},
                )
                return None

    # -- stopping -------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Let running attempts finish within the grace, then kill and release the rest."""
        logger.info(
            "stopping%s: taking nothing more; %d attempt(s) running, grace %d ms",
            f" on {self._signal}" if self._signal else "",
            len(self._live()),
            self.settings.grace_ms,
            extra={"event": "worker.stopping", "signal": self._signal},
        )
        deadline = time.monotonic() + self.settings.grace_ms / 1000
        while self._live() and time.monotonic() < deadline and not self._grace_over.is_set():
            self._safe_tick()
            self._wait()
        released = self._release(self._live())
        self._abort.set()
        self._close()
        logger.info(
            "worker stopped",
            extra={"event": "worker.stopped", "released_attempt_ids": released},
        )

    def _safe_tick(self) -> None:
        try:
            self._tick(taking=False)
        except SchemaMismatchError:
            self._grace_over.set()

    def _release(self, runners: Sequence[AttemptRunner]) -> list[int]:
        """Stop what still runs, wait until it is stopped, and hand its attempts back."""
        for runner in runners:
            runner.request_release()
        deadline = time.monotonic() + KILL_GRACE_S + 1
        for runner in runners:
            runner.settled.wait(max(deadline - time.monotonic(), 0))
        ids = [r.attempt.attempt_id for r in runners if r.needs_release]
        if not ids or self._repository is None:
            return []
        try:
            released = self._repository.release_attempts(self.worker_id, self.lease_token, ids)
        except QL3Error as exc:
            logger.warning(
                "could not release attempts %s; their leases expire by database time: %s",
                ids,
                exc,
                extra={"event": "attempts.release_failed", "attempt_ids": ids},
            )
            return []
        for attempt_id in released:
            logger.info(
                "attempt %d released: queued again",
                attempt_id,
                extra={"event": "attempt.released", "attempt_id": attempt_id},
            )
        return released

    def _close(self) -> None:
        self._reap()
        if self._repository is not None:
            try:
                self._repository.close()
            except QL3Error as exc:
                logger.debug("close failed: %s", exc, extra={"event": "worker.close_failed"})
        if self._metrics_server is not None:
            self._metrics_server.stop()

    def _start_metrics(self) -> None:
        if self.settings.metrics_port is None:
            return
        self._metrics_server = MetricsServer(
            self.metrics,
            self.health,
            host=self.settings.metrics_host,
            port=self.settings.metrics_port,
        ).start()
        logger.info(
            "serving /metrics and /healthz on port %d",
            self._metrics_server.port,
            extra={"event": "metrics.serving", "port": self._metrics_server.port},
        )


def _ids(attempt: TakenAttempt) -> dict[str, object]:
    """Return the fields every attempt log record carries (stable names log readers rely on)."""
    return {
        "attempt_id": attempt.attempt_id,
        "run_id": attempt.run_id,
        "attempt": attempt.attempt_number,
        "task": attempt.task_name,
    }
