"""The worker's database: the PostgreSQL ingress its settings build (DESIGN §10).

The settings themselves are in `_config`, beside the Coordinator's (each refuses the variables
neither declares). The worker only measures how long to wait, with `time.monotonic()`; leases,
timeouts' recorded ends and retry times are database times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ql3_cluster_postgres import AlertIngress, AttemptWakeups, WorkerIngress

from ql3_cluster_control._config import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_runtime_core import WorkerRepository

    from ql3_cluster_control._config import WorkerSettings

__all__ = ["postgres_alert_factory", "postgres_ingress_factory", "postgres_wakeup_factory"]


def _dsn(settings: WorkerSettings) -> str:
    dsn = settings.dsn_value()
    if dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_WORKER_DSN or QL3_DSN"
        raise ConfigurationError(msg)
    return dsn


def postgres_alert_factory(settings: WorkerSettings) -> Callable[[], AlertIngress]:
    """Return a factory of the alert ingress for `settings`: one connection, its own thread."""
    dsn = _dsn(settings)

    def build() -> AlertIngress:
        return AlertIngress(
            dsn,
            application_name=f"{settings.application_name[:56]}-alerts",
            max_connections=1,
            connect_timeout_s=settings.connect_timeout_s,
            statement_timeout_ms=settings.statement_timeout_ms,
        )

    return build


def postgres_ingress_factory(settings: WorkerSettings) -> Callable[[], WorkerRepository]:
    """Return a factory of the PostgreSQL ingress for `settings` (a pooled connection per slot)."""
    dsn = _dsn(settings)

    def build() -> WorkerRepository:
        return WorkerIngress(
            dsn,
            application_name=settings.application_name,
            # The loop, one per running attempt, and one more while a transactional task holds
            # its own for its whole run.
            max_connections=settings.concurrency + 2,
            connect_timeout_s=settings.connect_timeout_s,
            statement_timeout_ms=settings.statement_timeout_ms,
        )

    return build


def postgres_wakeup_factory(settings: WorkerSettings) -> Callable[[], AttemptWakeups]:
    """Return a factory of the worker's LISTEN connection (`ql3_attempt_queued`, one connection)."""
    dsn = _dsn(settings)

    def build() -> AttemptWakeups:
        return AttemptWakeups(
            dsn,
            application_name=f"{settings.application_name[:56]}-listen",
            connect_timeout_s=settings.connect_timeout_s,
        )

    return build
