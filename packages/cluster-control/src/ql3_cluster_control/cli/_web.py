"""`ql3 web`: serve the read-only console (the optional extra `ql3-cluster-control[web]`).

The console reads as `ql3_observer` (`--dsn`); with `--admin-dsn` it also offers pause, resume
and trigger now, each a POST form guarded by a CSRF token. Bound to anything but loopback it
needs `--token` or `--basic-auth` and refuses to start otherwise.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ql3_cluster_control._config import ConfigurationError

from ._common import Dsn, guarded, require_dsn

__all__ = ["web_command"]

_EXTRA_HINT = "the web console needs the extra: pip install 'ql3-cluster-control[web]'"


@guarded
def web_command(
    bind: Annotated[
        str, typer.Option("--bind", help="HOST:PORT to listen on (loopback unless guarded).")
    ] = "127.0.0.1:8080",
    dsn: Dsn = None,
    admin_dsn: Annotated[
        str | None,
        typer.Option(
            "--admin-dsn",
            envvar="QL3_WEB_ADMIN_DSN",
            help="A ql3_admin DSN: enables pause, resume and trigger now (CSRF-guarded forms).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="QL3_WEB_TOKEN",
            help="Require this token (Authorization: Bearer, or ?token= once, kept in a cookie).",
        ),
    ] = None,
    basic_auth: Annotated[
        str | None,
        typer.Option("--basic-auth", envvar="QL3_WEB_BASIC_AUTH", help="Require USER:PASSWORD."),
    ] = None,
) -> None:
    """Serve the web console: schedules, Runs, replicas, workers, alerts, the last verify."""
    try:
        from ql3_cluster_control.web import (  # noqa: PLC0415  # the optional extra
            ConsoleSettings,
            WebAccess,
            check_exposure,
            parse_basic_auth,
            parse_bind,
            serve_console,
        )
    except ImportError as exc:
        raise ConfigurationError(f"{_EXTRA_HINT} ({exc})") from None
    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise ConfigurationError(f"--bind: {bind!r}: {exc}") from None
    user, password = parse_basic_auth(basic_auth) if basic_auth is not None else (None, None)
    access = WebAccess(token=token, basic_user=user, basic_password=password)
    check_exposure(host, access)
    settings = ConsoleSettings(dsn=require_dsn(dsn), admin_dsn=admin_dsn, access=access)
    typer.echo(f"ql3 web: serving http://{host}:{port}/ (Ctrl-C stops)", err=True)
    serve_console(settings, host, port)
