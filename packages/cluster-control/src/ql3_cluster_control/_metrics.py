"""Prometheus metrics and the health endpoint of one Coordinator (prometheus-client).

Each Coordinator owns a `CollectorRegistry`, so several in one process (tests) never collide.
`/metrics` and `/healthz` are served by a tiny WSGI dispatcher on `wsgiref` in a daemon thread:
`start_http_server` would answer metrics on every path. Admission lateness is measured in database
time (`created_at_ms - scheduled_for_ms`); cycle duration with `time.monotonic()` (rule zero).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ql3_runtime_core import AdmittedRun, CycleSummary, ReplicationState, ZoneRulesCheck

__all__ = ["CoordinatorMetrics", "HealthState", "MetricsServer", "Registered", "metrics_wsgi_app"]

_LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Registered(Protocol):
    """Metrics kept in their own registry: a Coordinator's or a worker's."""

    registry: CollectorRegistry


class CoordinatorMetrics:
    """The counters, histograms and gauge of one Coordinator, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.cycles = Counter("ql3_cycles", "Coordinator cycles run", registry=reg)
        self.claims = Counter("ql3_claims", "Schedule claims granted", registry=reg)
        self.admissions = Counter("ql3_admissions", "Occurrences admitted as runs", registry=reg)
        self.raced = Counter("ql3_raced", "Commits refused by the fence (raced)", registry=reg)
        self.clock_regressions = Counter(
            "ql3_clock_regressions", "Cycles abandoned: the database clock went back", registry=reg
        )
        self.uncertain_resolved = Counter(
            "ql3_uncertain_resolved",
            "Commits whose reply was lost, settled from durable facts",
            ["outcome"],
            registry=reg,
        )
        self.already_admitted = Counter(
            "ql3_already_admitted",
            "Decided occurrences that already had a run: settled by UNIQUE, not admitted again",
            registry=reg,
        )
        self.serialization_retries = Counter(
            "ql3_serialization_retries", "SQLSTATE 40001 retries of commits", registry=reg
        )
        self.database_faults = Counter(
            "ql3_database_faults", "Recovered database faults (connection loss, ...)", registry=reg
        )
        self.cycle_duration = Histogram(
            "ql3_cycle_duration_seconds",
            "Duration of one cycle (monotonic clock)",
            buckets=_DURATION_BUCKETS,
            registry=reg,
        )
        self.admission_lateness = Histogram(
            "ql3_admission_lateness_seconds",
            "created_at_ms - scheduled_for_ms of each admission, in database time",
            buckets=_LATENESS_BUCKETS,
            registry=reg,
        )
        self.claims_held = Gauge("ql3_claims_held", "Claims held right now", registry=reg)
        self.quarantined = Counter(
            "ql3_schedules_quarantined",
            "Schedules this replica put in state invalid (unreadable or undecidable)",
            registry=reg,
        )
        self.schedules_invalid = Gauge(
            "ql3_schedules_invalid",
            "Schedules in state invalid in the database (read at connect and idle polls)",
            registry=reg,
        )
        self.zone_rules_mismatch = Gauge(
            "ql3_zone_rules_mismatch",
            "1 while this replica cannot load the recorded zone rules from the database (it"
            " claims nothing)",
            registry=reg,
        )
        self.schedules_overdue = Gauge(
            "ql3_schedules_overdue",
            "Active schedules whose cursor is more than lease + misfire grace behind the"
            " database clock (read at idle polls)",
            registry=reg,
        )
        self.failovers = Counter(
            "ql3_failovers",
            "Reconnects that found another timeline or system identifier (a failover)",
            registry=reg,
        )
        self.replication_unsafe = Gauge(
            "ql3_replication_unsafe",
            "1 while the primary streams to standbys and commits do not wait for a synchronous"
            " one: an acknowledged admission can be lost at failover",
            registry=reg,
        )
        self.timeline = Gauge(
            "ql3_database_timeline",
            "Timeline of the primary this replica talks to (read at connect and idle polls)",
            registry=reg,
        )

    def observe_cycle(self, summary: CycleSummary, duration_s: float) -> None:
        """Account one finished cycle."""
        self.cycles.inc()
        self.claims.inc(summary.claims)
        self.raced.inc(summary.raced)
        self.serialization_retries.inc(summary.serialization_retries)
        self.cycle_duration.observe(duration_s)

    def observe_admissions(self, runs: Sequence[AdmittedRun]) -> None:
        """Account admissions that passed the fence, with their database-time lateness."""
        if not runs:
            return
        self.admissions.inc(len(runs))
        # Never negative: a run is never committed before its occurrence (`verify`'s `early`
        # rule); the clamp only keeps a broken history from skewing the histogram.
        observe = self.admission_lateness.observe
        for run in runs:
            observe(max(run.created_at_ms - run.scheduled_for_ms, 0) / 1000)


@dataclass
class HealthState:
    """What `/healthz` reports.

    Healthy when connected, the schema version matches and the replica decides with the recorded
    zone rules (it loads them from the database; one that cannot claims nothing). Unsafe
    replication (DESIGN §13) is named in the detail but leaves the replica healthy: it is the
    database's configuration, which no restart or rescheduling of replicas changes; alert on
    `ql3_replication_unsafe` instead.
    """

    connected: bool = False
    schema_ok: bool = False
    zone_rules: ZoneRulesCheck | None = None
    replication: ReplicationState | None = None

    @property
    def healthy(self) -> bool:
        """True when the replica can do its work."""
        zone_ok = self.zone_rules is None or self.zone_rules.agrees
        return self.connected and self.schema_ok and zone_ok

    def describe(self) -> str:
        """One line for `/healthz`: `ok`, or why the replica cannot do its work."""
        if self.healthy:
            return "ok" + self._replication_detail()
        problems = []
        if not (self.connected and self.schema_ok):
            problems.append(f"connected={self.connected} schema_ok={self.schema_ok}")
        rules = self.zone_rules
        if rules is not None and not rules.agrees:
            problems.append(f"{rules.describe()}; no claim until it can load them")
        return "unhealthy: " + "; ".join(problems) + self._replication_detail()

    def _replication_detail(self) -> str:
        state = self.replication
        if state is None or not state.unsafe:
            return ""
        return "; replication: " + state.describe()


def metrics_wsgi_app(
    metrics: Registered, health: HealthState
) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """Build the WSGI app answering `/metrics` (Prometheus text) and `/healthz` (200 or 503)."""
    prometheus = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return prometheus(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            body = (health.describe() + "\n").encode()
            status = "200 OK" if health.healthy else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


class _QuietHandler(WSGIRequestHandler):
    """No access log: the default one stamps lines with the node's wall clock (rule zero)."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002, ARG002  # stdlib signature
        return


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    # A slow scraper must not hold up the next request, nor a stopping process's exit.
    daemon_threads = True


class MetricsServer:
    """Serves `metrics_wsgi_app` on `host:port` from a daemon thread; `port=0` picks a free one."""

    def __init__(self, metrics: Registered, health: HealthState, *, host: str, port: int) -> None:
        self._server = make_server(
            host,
            port,
            metrics_wsgi_app(metrics, health),
            server_class=_ThreadingServer,
            handler_class=_QuietHandler,
        )
        self.port: int = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ql3-metrics", daemon=True
        )

    def start(self) -> MetricsServer:
        """Start serving."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
