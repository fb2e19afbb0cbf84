"""`ql3 demo`: replicas racing on a private PostgreSQL, one killed, a verdict (see `demo/`)."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from typing import Annotated

import typer

from ql3_cluster_control._config import LogFormat
from ql3_cluster_control._logs import configure_logging
from ql3_cluster_control.demo import DemoOptions, run_demo

from ._common import EXIT_FAILURE, EXIT_INTERRUPTED, fail, guarded

__all__ = ["demo_command"]


@guarded
def demo_command(
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=16)] = 3,
    seconds: Annotated[float, typer.Option("--seconds", min=2, max=3_600)] = 20,
    schedules: Annotated[int, typer.Option("--schedules", min=1, max=10_000)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="QL3_DSN",
            help="Use this database instead of a private one (a scratch one: the demo's"
            " replicas and worker act on every schedule and command task in it).",
        ),
    ] = None,
) -> None:
    """Start a private PostgreSQL, run replicas and a worker, SIGKILL a replica, judge it all."""
    if not as_json:
        configure_logging(LogFormat.TEXT, level="WARNING")
    try:
        verdict = run_demo(
            DemoOptions(
                replicas=replicas, seconds=seconds, schedules=schedules, as_json=as_json, dsn=dsn
            )
        )
    except KeyboardInterrupt:
        raise fail(EXIT_INTERRUPTED, "demo interrupted; everything it started is stopped") from None
    if not verdict.ok:
        raise typer.Exit(EXIT_FAILURE)
