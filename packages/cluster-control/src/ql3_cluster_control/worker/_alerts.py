"""The worker's alert duty: record due alerts, deliver pending ones (migration 0013).

One thread beside the worker's loop, on its own connection, so a slow command or webhook never
delays a heartbeat. Every `interval_s` it records the `missed` and `late` alerts the database
clock made due: one cheap statement when nothing is overdue, and per overdue schedule one more
with its missed occurrences (one alert each, computed in `ql3_cluster_postgres`), so `missed` is
recorded while every Coordinator is down: any worker does it, and the UNIQUE key keeps racing
workers to one alert per occurrence. It then takes the pending alerts it may try now under its
lease, delivers each (`_alert_delivery`) and records the outcome; the database decides when a
failed one is tried again (exponential backoff) and when it is given up. Faults are logged and
retried at the next interval.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Final, Protocol
from uuid import UUID, uuid4

from ql3_runtime_core import QL3Error, log_event

from ._alert_delivery import deliver_alert

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_postgres import RecordedAlert, TakenAlert

    from ._metrics import WorkerMetrics

__all__ = ["ALERT_LEASE_MS", "AlertDispatcher", "AlertRepository"]

logger = logging.getLogger(__name__)

# One delivery attempt (command 30 s + webhook 10 s at most) fits in it.
ALERT_LEASE_MS: Final = 60_000
_TAKE_LIMIT: Final = 4


class AlertRepository(Protocol):
    """What the dispatcher needs of the database (`ql3_cluster_postgres.AlertIngress`)."""

    def record_due_alerts(self) -> list[RecordedAlert]: ...

    def take_alerts(self, *, lease_token: UUID, lease_ms: int, limit: int) -> list[TakenAlert]: ...

    def finish_alert(
        self,
        alert_id: int,
        *,
        lease_token: UUID,
        worker_id: str,
        started_at_ms: int,
        error: str | None,
    ) -> str | None: ...

    def close(self) -> None: ...


class AlertDispatcher:
    """Records due alerts and delivers pending ones, on its own thread, until stopped."""

    def __init__(
        self,
        factory: Callable[[], AlertRepository],
        *,
        worker_id: str,
        metrics: WorkerMetrics,
        interval_s: float,
    ) -> None:
        self._factory = factory
        self._worker_id = worker_id
        self._metrics = metrics
        self._interval_s = interval_s
        self.lease_token = uuid4()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._repository: AlertRepository | None = None

    def start(self) -> AlertDispatcher:
        """Start the thread (a daemon: an alert held at exit expires by its lease)."""
        self._thread = threading.Thread(target=self._main, name="ql3-alerts", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the thread to stop after the delivery in progress; wait up to `timeout_s`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _main(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.run_once()
                except Exception as exc:  # noqa: BLE001 - the duty must outlive one bad round
                    log_event(
                        logger,
                        logging.ERROR,
                        "alerts.error",
                        error=type(exc).__name__,
                        reason=str(exc),
                    )
                self._stop.wait(self._interval_s)
        finally:
            if self._repository is not None:
                try:
                    self._repository.close()
                except QL3Error as exc:
                    log_event(logger, logging.DEBUG, "alerts.close_failed", reason=str(exc))

    def run_once(self) -> int:
        """Record due alerts, then deliver what may be tried now; return how many were tried."""
        try:
            if self._repository is None:
                self._repository = self._factory()
            repository = self._repository
            for recorded in repository.record_due_alerts():
                log_event(
                    logger,
                    logging.WARNING,
                    "alert.recorded",
                    alert_id=recorded.alert_id,
                    kind=recorded.kind,
                    schedule_id=recorded.schedule_id,
                    subject=recorded.subject_key,
                )
            taken = repository.take_alerts(
                lease_token=self.lease_token, lease_ms=ALERT_LEASE_MS, limit=_TAKE_LIMIT
            )
            for alert in taken:
                if self._stop.is_set():
                    break  # what is left expires by its lease and is taken again
                self._deliver(repository, alert)
        except QL3Error as exc:
            log_event(
                logger, logging.WARNING, "alerts.fault", error=type(exc).__name__, reason=str(exc)
            )
            return 0
        return len(taken)

    def _deliver(self, repository: AlertRepository, alert: TakenAlert) -> None:
        if alert.attempt_number == 1:
            self._metrics.alerts.labels(kind=alert.kind).inc()
        error = deliver_alert(alert)
        if error is not None:
            self._metrics.alert_delivery_failures.inc()
        state = repository.finish_alert(
            alert.alert_id,
            lease_token=self.lease_token,
            worker_id=self._worker_id,
            started_at_ms=alert.taken_at_ms,
            error=error,
        )
        log_event(
            logger,
            logging.INFO if error is None else logging.WARNING,
            "alert.delivery",
            alert_id=alert.alert_id,
            kind=alert.kind,
            attempt=alert.attempt_number,
            state=state,
            error=error,
        )
