"""`ql3 run` (a Coordinator replica) and `ql3 worker`: the long-running processes.

Each configures logging from its settings (the only verbs that install log handlers besides
`demo`), installs signal handlers and exits with its loop's code.
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: PLR0917

from __future__ import annotations

import logging
from typing import Annotated, NoReturn

import typer
from ql3_cluster_postgres import SchemaMismatchError
from ql3_runtime_core import log_event

from ql3_cluster_control._config import (
    ConfigurationError,
    LogFormat,
    load_settings,
    load_worker_settings,
)
from ql3_cluster_control._logs import configure_logging
from ql3_cluster_control.coordinator import CoordinatorService
from ql3_cluster_control.worker import Worker

from ._common import guarded

__all__ = ["run_command", "worker_command"]

# The verbs log under the app's name, as they did when they were one module with it.
logger = logging.getLogger("ql3_cluster_control.cli._app")


@guarded
def run_command(  # one flag per setting
    dsn: Annotated[str | None, typer.Option("--dsn", help="Or QL3_DSN.")] = None,
    owner_id: Annotated[str | None, typer.Option("--owner-id")] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port")] = None,
    log_format: Annotated[LogFormat | None, typer.Option("--log-format")] = None,
    log_level: Annotated[str | None, typer.Option("--log-level")] = None,
    lease_ms: Annotated[int | None, typer.Option("--lease-ms")] = None,
    claim_batch: Annotated[int | None, typer.Option("--claim-batch")] = None,
    cycle_budget: Annotated[int | None, typer.Option("--cycle-budget")] = None,
    poll_interval_ms: Annotated[int | None, typer.Option("--poll-interval-ms")] = None,
    clock: Annotated[str | None, typer.Option("--clock", hidden=True)] = None,
) -> None:
    """Run the Coordinator daemon until SIGTERM/SIGINT (then release claims and exit 0).

    Every setting is also read from QL3_<NAME> (QL3_DSN, QL3_LEASE_MS, QL3_KEEPALIVES_IDLE_S, ...).
    """
    settings = load_settings(
        dsn=dsn,
        owner_id=owner_id,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
        lease_ms=lease_ms,
        claim_batch=claim_batch,
        cycle_budget=cycle_budget,
        poll_interval_ms=poll_interval_ms,
        clock=clock,
    )
    # Settings without a DSN are valid (a library user may pass a repository factory instead);
    # the command line has no other way to reach a database.
    if settings.dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_DSN"
        raise ConfigurationError(msg)
    # Logging is configured only once the settings are known good: a bad flag stays one line.
    configure_logging(settings.log_format, level=settings.log_level, owner_id=settings.owner_id)
    _serve(CoordinatorService(settings), "service")


@guarded
def worker_command(  # one flag per setting
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", help="A ql3_worker_ingress login; or QL3_WORKER_DSN/QL3_DSN."),
    ] = None,
    worker_id: Annotated[str | None, typer.Option("--worker-id")] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Attempts run at once (default 4).")
    ] = None,
    lease_ms: Annotated[
        int | None, typer.Option("--lease-ms", help="Lease by the database clock (default 30000).")
    ] = None,
    poll_interval_ms: Annotated[int | None, typer.Option("--poll-interval-ms")] = None,
    grace_ms: Annotated[
        int | None,
        typer.Option("--grace-ms", help="On SIGTERM, how long running attempts may finish."),
    ] = None,
    statement_timeout_ms: Annotated[
        int | None,
        typer.Option(
            "--statement-timeout-ms",
            help="Longest database call; the connection is cut 1 s later (default 5000).",
        ),
    ] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port")] = None,
    log_format: Annotated[LogFormat | None, typer.Option("--log-format")] = None,
    log_level: Annotated[str | None, typer.Option("--log-level")] = None,
    clock: Annotated[str | None, typer.Option("--clock", hidden=True)] = None,
) -> None:
    """Run admitted attempts until SIGTERM/SIGINT (then finish or release them and exit 0).

    Takes queued attempts of command tasks (SKIP LOCKED), runs each with /bin/sh -c in its own
    process group, keeps its lease alive by the database clock, kills it at its timeout and
    records how it ended; a failure is retried after the task's backoff until max_attempts.
    Every setting is also read from QL3_WORKER_<NAME> (QL3_WORKER_CONCURRENCY, ...).
    """
    settings = load_worker_settings(
        dsn=dsn,
        id=worker_id,
        concurrency=concurrency,
        lease_ms=lease_ms,
        poll_interval_ms=poll_interval_ms,
        grace_ms=grace_ms,
        statement_timeout_ms=statement_timeout_ms,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
        clock=clock,
    )
    if settings.dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_WORKER_DSN or QL3_DSN"
        raise ConfigurationError(msg)
    configure_logging(settings.log_format, level=settings.log_level, owner_id=settings.id)
    _serve(Worker(settings), "worker")


def _serve(loop: CoordinatorService | Worker, component: str) -> NoReturn:
    """Run `loop` until a signal stops it and exit with its code.

    A schema mismatch is logged as one structured record (`<component>.schema_mismatch`) before
    `guarded` turns it into exit 3, so a log collector sees it even when stderr goes nowhere.
    """
    loop.install_signal_handlers()
    try:
        code = loop.run()
    except SchemaMismatchError as exc:
        log_event(logger, logging.ERROR, f"{component}.schema_mismatch", reason=str(exc))
        raise
    raise typer.Exit(code)
