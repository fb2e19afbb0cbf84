"""The web room: the read-only console `ql3 web` serves (optional extra `ql3-cluster-control[web]`).

Starlette + Jinja2 served by uvicorn; templates and the stylesheet ship in the wheel. It reads
through cluster-postgres's `ConsoleReader` and acts only through `ScheduleAdmin`: like the rest
of this package it never speaks SQL. The `cli` room imports it lazily, so `ql3` works without
the extra installed.

May import: the package's base modules. Never `coordinator`, `worker` or `demo`.
"""

from __future__ import annotations

from ._app import ConsoleSettings, console_app
from ._format import format_instant, format_relative, format_span
from ._guard import WebAccess, check_exposure, is_loopback, parse_basic_auth
from ._serve import ConsoleServer, parse_bind, serve_console

__all__ = [
    "ConsoleServer",
    "ConsoleSettings",
    "WebAccess",
    "check_exposure",
    "console_app",
    "format_instant",
    "format_relative",
    "format_span",
    "is_loopback",
    "parse_basic_auth",
    "parse_bind",
    "serve_console",
]
