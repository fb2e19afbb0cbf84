"""The Coordinator service loop (DESIGN §13): cycles, idle sleep, faults, signals, graceful stop.

One loop per replica, talking to storage only through `ql3_runtime_core.ServiceRepository`
(the PostgreSQL repository in production, an in-memory fake in unit tests). Work remaining ->
next cycle at once. Idle -> sleep until the database's next-due hint, woken early by
`LISTEN ql3_schedule_changed`, capped by the poll interval; all sleeps are monotonic waits
(rule zero). A database fault never ends the loop: log a WARNING, wait (see below), reconnect,
go on. Only a schema mismatch stops it (exit code 3), and SIGTERM or
SIGINT, after which held claims are released so another replica takes over at once (DESIGN §5).

Zone rules: a replica decides with the recorded zone rules, loaded from the database, and follows
an adopt at once (the next claim statement sees the new version, the repository loads it). Only a
replica that cannot load the recorded version (the database holds no rule data for it) claims
nothing, and keeps running: `/healthz` answers 503 naming both versions and why,
`ql3_zone_rules_mismatch` is 1, a WARNING is logged once per change, and idle waits use the poll
interval instead of a due hint it cannot act on. Once the data is stored or another version is
adopted (which wakes it), it claims again without a restart. The recorded version and the number
of quarantined schedules (`ql3_schedules_invalid`) are read at connect and at idle polls, at most
every `_CLUSTER_STATE_EVERY_S` seconds; every claim statement reports the zone rules too. The
number of overdue schedules (`ql3_schedules_overdue`: schedules falling behind) is read at idle
polls only, on the same period.

Replication safety (DESIGN §13): at every (re)connect, and at idle polls on the same period, the
service reads the node: a standby (in recovery) is refused as `NoWritableServerError`, so nothing
is ever claimed there; another system identifier or timeline than at the last connect is a
failover (WARNING, `ql3_failovers_total`); a primary streaming to standbys whose commits do not
wait for a synchronous one is `replication: unsafe` (WARNING, `/healthz` detail,
`ql3_replication_unsafe`). Faults are retried by `ReconnectPolicy`: after a short fixed delay
while a server answers but none accepts writes (a leader change), with backoff otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ql3_cluster_postgres import PostgresScheduleRepository, SchemaMismatchError
from ql3_runtime_core import QL3Error, ServiceRepository, ZoneRulesCheck, log_event

from ql3_cluster_control._backoff import Backoff, ReconnectPolicy
from ql3_cluster_control._metrics import CoordinatorMetrics, HealthState, MetricsServer
from ql3_cluster_control._stop_signals import install_stop_signals

from ._auto_resume import AutoResume
from ._coordinator import Coordinator
from ._guard import NodeFields, ReplicationGuard, node_fields

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_control._config import CoordinatorSettings

    from ._cycle import AdmissionCallback

__all__ = ["CoordinatorService", "postgres_repository_factory"]

logger = logging.getLogger(__name__)

# Longest uninterrupted wait: a stop request is noticed at least this often even while the
# LISTEN wait blocks inside the driver.
_WAIT_SLICE_S = 0.25
_MIN_EMPTY_WAIT_S = 0.005
_DUE_MARGIN_MS = 1
# How often an idle replica reads the recorded zone rules, the invalid count and the overdue
# count (monotonic): each is a scan a busy cluster of idle replicas should not repeat per poll.
_CLUSTER_STATE_EVERY_S = 5.0


def postgres_repository_factory(settings: CoordinatorSettings) -> Callable[[], ServiceRepository]:
    """Return a factory building the PostgreSQL repository with the settings' connection options."""
    dsn = settings.dsn_value()
    if dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_DSN"
        raise QL3Error(msg)

    def build() -> ServiceRepository:
        return PostgresScheduleRepository(
            dsn,
            connection=settings.connection_settings(),
            max_serialization_retries=settings.max_serialization_retries,
        )

    return build


class CoordinatorService:
    """Runs one replica's loop until stopped; `run()` returns the process exit code."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        repository_factory: Callable[[], ServiceRepository] | None = None,
        on_admitted: AdmissionCallback | None = None,
    ) -> None:
        self.settings = settings
        self._factory = repository_factory or postgres_repository_factory(settings)
        self._on_admitted = on_admitted
        self.stop_event = threading.Event()
        self.metrics = CoordinatorMetrics()
        self.health = HealthState()
        self.backoff = Backoff(
            initial_s=settings.retry_initial_ms / 1000, maximum_s=settings.retry_max_ms / 1000
        )
        self.reconnect = ReconnectPolicy(
            self.backoff,
            fast_s=settings.retry_fast_ms / 1000,
            fast_window_s=settings.retry_fast_window_ms / 1000,
        )
        self._repository: ServiceRepository | None = None
        self._coordinator: Coordinator | None = None
        self._metrics_server: MetricsServer | None = None
        self._signal: str | None = None
        self._cluster_state_read_at: float | None = None
        self._overdue_read_at: float | None = None
        self.guard = ReplicationGuard(self.metrics, self.health)
        self.auto_resume = AutoResume()

    def request_stop(self) -> None:
        """Ask the loop to finish its cycle, release its claims and return; safe from a signal."""
        self.stop_event.set()

    def install_signal_handlers(self) -> None:
        """Turn SIGTERM and SIGINT into a graceful stop (main thread only)."""
        install_stop_signals(self._stop_on_signal)

    def _stop_on_signal(self, name: str) -> None:
        self._signal = name
        self.request_stop()

    def run(self) -> int:
        """Run until stopped; 0 after a graceful stop.

        Raises:
            SchemaMismatchError: the database schema is not the version this build expects.

        """
        self._start_metrics()
        log_event(
            logger,
            logging.INFO,
            "service.started",
            lease_ms=self.settings.lease_ms,
            claim_batch=self.settings.claim_batch,
            cycle_budget=self.settings.cycle_budget,
            poll_interval_ms=self.settings.poll_interval_ms,
        )
        try:
            self._loop()
        finally:
            self._shutdown()
        return 0

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                self._step()
                self.reconnect.reset()
            except SchemaMismatchError:
                raise
            except QL3Error as exc:
                self._fault(exc)

    def _step(self) -> None:
        coordinator = self._connect()
        result = coordinator.run_cycle()
        if result.zone_rules is not None:
            self._observe_zone_rules(result.zone_rules)
        # Spans whose until has come are resumed by the database's verdict (DESIGN §7); a
        # resumed schedule may be due at once, so claim again before sleeping.
        resumed = self.auto_resume.step(self._repository_or_raise())
        if result.work_remaining or resumed or self.stop_event.is_set():
            return
        self._idle(self._repository_or_raise())

    def _connect(self) -> Coordinator:
        if self._coordinator is not None and self._repository is not None:
            return self._coordinator
        repository = self._factory()
        self._repository = repository
        try:
            version = repository.check_schema()
        except SchemaMismatchError:
            self.health.connected, self.health.schema_ok = True, False
            raise
        self.guard.check(repository)
        self.health.connected, self.health.schema_ok = True, True
        self._read_cluster_state(repository)
        held = self._coordinator.held_claims if self._coordinator is not None else ()
        self._coordinator = Coordinator(
            repository,
            owner_id=self.settings.owner_id,
            lease_ms=self.settings.lease_ms,
            claim_batch=self.settings.claim_batch,
            cycle_budget=self.settings.cycle_budget,
            on_admitted=self._on_admitted,
            metrics=self.metrics,
            backoff=self.backoff,
            stop_requested=self.stop_event,
        )
        # Claims granted before a fault still stand until they expire; the new Coordinator
        # releases them first thing (exact match), so nothing waits for the lease needlessly.
        self._coordinator.adopt_claims(held)
        node = self.guard.node
        fields: NodeFields = {} if node is None else node_fields(node)
        log_event(
            logger,
            logging.INFO,
            "service.connected",
            schema_version=version,
            replication="unknown" if node is None else node.describe(),
            **fields,
        )
        return self._coordinator

    def _repository_or_raise(self) -> ServiceRepository:
        if self._repository is None:
            msg = "not connected"
            raise QL3Error(msg)
        return self._repository

    def _read_cluster_state(self, repository: ServiceRepository) -> None:
        """Read the recorded zone rules and the invalid count; update health and metrics."""
        state = repository.read_cluster_state()
        self._cluster_state_read_at = time.monotonic()
        self.metrics.schedules_invalid.set(state.invalid_schedules)
        self._observe_zone_rules(state.zone_rules)

    def _observe_zone_rules(self, check: ZoneRulesCheck) -> None:
        """Publish the zone rules comparison; log a WARNING each time a mismatch appears."""
        previous, self.health.zone_rules = self.health.zone_rules, check
        self.metrics.zone_rules_mismatch.set(0 if check.agrees else 1)
        if check == previous:
            return
        if not check.agrees:
            # Claiming nothing until it can load the recorded rules (see the module docstring).
            log_event(
                logger,
                logging.WARNING,
                "zone_rules.mismatch",
                local_version=check.local_version,
                recorded_version=check.recorded_version,
                problem=check.problem,
                detail=check.describe(),
            )
        elif previous is None or previous.local_version != check.local_version:
            log_event(
                logger,
                logging.INFO,
                "zone_rules.loaded",
                local_version=check.local_version,
                recorded_version=check.recorded_version,
            )

    def _idle(self, repository: ServiceRepository) -> None:
        """Sleep until the next due time by the database, a change notification, or the cap."""
        cap_s = self.settings.poll_interval_ms / 1000
        if _due(self._cluster_state_read_at):
            self._read_cluster_state(repository)
            self.guard.observe(repository.read_replication_state())
        if _due(self._overdue_read_at):
            self._observe_overdue(repository)
        zone_rules = self.health.zone_rules
        # A replica whose zone rules differ cannot claim what is due: only a change (adopt
        # notifies) or the poll interval is worth waking for.
        hint_ms = (
            None
            if zone_rules is not None and not zone_rules.agrees
            else repository.next_due_in_ms()
        )
        if hint_ms is None:
            wait_s = cap_s
        elif hint_ms <= 0:
            # Due now but our claim found nothing (another replica is claiming or committing
            # it): do not spin on it, but look again soon.
            wait_s = _MIN_EMPTY_WAIT_S
        else:
            # One millisecond past the database's due time, so the claim never arrives early.
            wait_s = min((hint_ms + _DUE_MARGIN_MS) / 1000, cap_s)
        deadline = time.monotonic() + wait_s
        while not self.stop_event.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if repository.wait_for_wakeup(min(left, _WAIT_SLICE_S)):
                log_event(logger, logging.DEBUG, "service.woken")
                return

    def _observe_overdue(self, repository: ServiceRepository) -> None:
        """Refresh the `ql3_schedules_overdue` gauge from the database (database time, DESIGN §1).

        Read at idle polls (at most every `_CLUSTER_STATE_EVERY_S`): a replica idles only when
        nothing it can claim is due, so a schedule overdue by more than lease + grace then means
        no replica is deciding it.
        """
        overdue = repository.count_overdue_schedules(self.settings.lease_ms)
        self._overdue_read_at = time.monotonic()
        self.metrics.schedules_overdue.set(overdue)
        # The same idle polls record the alerts whose bound passed (workers do it too).
        recorded = repository.record_due_alerts()
        if recorded:
            log_event(logger, logging.WARNING, "alerts.recorded", count=recorded)

    def _fault(self, exc: QL3Error) -> None:
        delay = self.reconnect.delay_s(exc)
        self.metrics.database_faults.inc()
        self.health.connected = False
        log_event(
            logger,
            logging.WARNING,
            "service.fault",
            error=type(exc).__name__,
            reason=str(exc),
            attempt=self.reconnect.faults,
            leader_changing=self.reconnect.leader_changing(exc),
            retry_in_ms=round(delay * 1000),
        )
        self._close_repository()
        self.stop_event.wait(delay)

    def _close_repository(self) -> None:
        repository, self._repository = self._repository, None
        if repository is None:
            return
        try:
            repository.close()
        except QL3Error as exc:
            log_event(logger, logging.DEBUG, "service.close_failed", reason=str(exc))

    def _shutdown(self) -> None:
        if self._signal is not None:
            log_event(logger, logging.INFO, "service.stopping", signal=self._signal)
        coordinator = self._coordinator
        if coordinator is not None and coordinator.held_claims:
            try:
                if self._repository is None:
                    self._repository = self._factory()
                    coordinator.repository = self._repository
                coordinator.release_held_claims()
            except QL3Error as exc:
                # They expire by database time; another replica then claims the schedules.
                log_event(logger, logging.WARNING, "claims.release_failed", reason=str(exc))
        self._close_repository()
        if self._metrics_server is not None:
            self._metrics_server.stop()
        log_event(logger, logging.INFO, "service.stopped")

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


def _due(read_at: float | None) -> bool:
    """Whether a periodic idle read last done at `read_at` (monotonic, None: never) is due."""
    return read_at is None or time.monotonic() - read_at >= _CLUSTER_STATE_EVERY_S
