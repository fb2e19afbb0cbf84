"""Prometheus metrics of one worker (DESIGN §10), in its own registry like the Coordinator's.

Served with `/healthz` by the same `MetricsServer`. The queue delay is database time (taken at
minus eligible at, both from `clock_timestamp()`); nothing here reads a node clock (rule zero).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from ql3_cluster_postgres import ALERT_KINDS

__all__ = ["OUTCOMES", "WorkerMetrics"]

# How an attempt this worker took ended for it: the recorded states, `lost` (its lease was over
# before it could record: another worker abandons and retries it) and `released` (handed back
# at a graceful stop).
OUTCOMES: Final = ("succeeded", "failed", "timed_out", "lost", "released")
_DELAY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class WorkerMetrics:
    """The counters, gauge and histogram of one worker."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.attempts = Counter(
            "ql3_worker_attempts",
            "Attempts this worker took, by how they ended for it",
            ["outcome"],
            registry=reg,
        )
        for outcome in OUTCOMES:  # every series exists from the start, at 0
            self.attempts.labels(outcome=outcome)
        self.running = Gauge(
            "ql3_worker_running", "Attempts this worker is executing right now", registry=reg
        )
        self.queue_delay = Histogram(
            "ql3_attempt_queue_delay_seconds",
            "Database time from an attempt becoming eligible to a worker taking it",
            buckets=_DELAY_BUCKETS,
            registry=reg,
        )
        self.abandoned = Counter(
            "ql3_worker_abandoned",
            "Attempts of other workers whose lease expired, marked abandoned by this worker",
            registry=reg,
        )
        self.database_faults = Counter(
            "ql3_worker_database_faults",
            "Recovered database faults (connection loss, ...)",
            registry=reg,
        )

        # Alerts (migration 0013). Each alert is counted by the worker that takes it for its first
        # delivery attempt, so the sum over workers is the alerts recorded; every failed delivery
        # attempt is counted by the worker that made it.
        self.alerts = Counter(
            "ql3_alerts",
            "Alerts recorded by the database, counted at their first delivery attempt, by kind",
            ["kind"],
            registry=reg,
        )
        for kind in ALERT_KINDS:
            self.alerts.labels(kind=kind)
        self.alert_delivery_failures = Counter(
            "ql3_alert_delivery_failures",
            "Alert delivery attempts (command or webhook) that failed and will be retried",
            registry=reg,
        )

    def observe_taken(self, queue_delay_ms: int) -> None:
        """Account one taken attempt's queue delay (database milliseconds)."""
        self.queue_delay.observe(queue_delay_ms / 1000)

    def observe_outcome(self, outcome: str) -> None:
        """Account how one attempt ended for this worker (one of `OUTCOMES`)."""
        self.attempts.labels(outcome=outcome).inc()
