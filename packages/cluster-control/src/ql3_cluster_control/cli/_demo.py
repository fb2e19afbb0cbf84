"""`ql3 demo`: replicas racing on a private PostgreSQL, one killed, a verdict (see `demo/`)."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002, PLR0917

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

import typer

from ql3_cluster_control._config import ConfigurationError, LogFormat
from ql3_cluster_control._logs import configure_logging
from ql3_cluster_control.demo import DemoOptions, run_demo

from ._common import EXIT_FAILURE, EXIT_INTERRUPTED, fail, guarded

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

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
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Serve the web console (extra `web`) while the demo runs, as ql3_observer with"
            " the demo's admin for actions.",
        ),
    ] = False,
    web_bind: Annotated[
        str, typer.Option("--web-bind", help="Where `--web` listens (loopback).")
    ] = "127.0.0.1:8080",
) -> None:
    """Start a private PostgreSQL, run replicas and a worker, SIGKILL a replica, judge it all."""
    if not as_json:
        configure_logging(LogFormat.TEXT, level="WARNING")
    try:
        verdict = run_demo(
            DemoOptions(
                replicas=replicas,
                seconds=seconds,
                schedules=schedules,
                as_json=as_json,
                dsn=dsn,
                serve=_console_server(web_bind) if web else None,
            )
        )
    except KeyboardInterrupt:
        raise fail(EXIT_INTERRUPTED, "demo interrupted; everything it started is stopped") from None
    if not verdict.ok:
        raise typer.Exit(EXIT_FAILURE)


def _console_server(bind: str) -> Callable[[str, str], AbstractContextManager[object]]:
    """Return what serves the console beside the demo, on loopback (`--web`).

    Raises:
        ConfigurationError: the extra is not installed, or `bind` is not loopback.

    """
    try:
        from ql3_cluster_control.web import (  # noqa: PLC0415  # the optional extra
            ConsoleServer,
            ConsoleSettings,
            WebAccess,
            check_exposure,
            parse_bind,
        )
    except ImportError as exc:
        msg = f"--web: the console needs the extra: pip install 'ql3-cluster-control[web]' ({exc})"
        raise ConfigurationError(msg) from None
    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise ConfigurationError(f"--web-bind: {bind!r}: {exc}") from None
    check_exposure(host, WebAccess())

    @contextlib.contextmanager
    def serve(observer_dsn: str, admin_dsn: str) -> Iterator[object]:
        server = ConsoleServer(ConsoleSettings(dsn=observer_dsn, admin_dsn=admin_dsn), host, port)
        server.start()
        typer.echo(f"web console: {server.url}/ (while the demo runs)", err=True)
        try:
            yield server
        finally:
            server.stop()

    return serve
