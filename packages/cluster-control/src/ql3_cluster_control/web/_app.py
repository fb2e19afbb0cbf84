"""The console's Starlette application: server-rendered pages, no script, no CDN (DESIGN §15).

Pages read through `ConsoleReader` (as `ql3_observer`), each in one database snapshot, and are
rendered by Jinja2 templates shipped in the wheel with one stylesheet. Every time on a page is a
database instant (rule zero). Actions (pause, resume, trigger now) exist only when the console
was given an admin DSN; each is a POST form carrying the process's CSRF token and calls the
same `ScheduleAdmin` methods as `ql3 schedule pause|resume|trigger`.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from ql3_cluster_postgres import ConsoleReader, ScheduleAdmin
from ql3_runtime_core import QL3Error
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ._format import format_instant, format_relative, format_span, lateness_chart
from ._guard import AccessGuard, CsrfToken, WebAccess

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.requests import Request

__all__ = ["ConsoleSettings", "console_app"]

_HERE: Final = Path(__file__).parent
_ACTIONS: Final = frozenset({"pause", "resume", "trigger"})
# `?page=` is refused beyond this many digits (a page past the last one is merely empty).
_PAGE_DIGITS: Final = 4


@dataclass(frozen=True)
class ConsoleSettings:
    """What a console serves: the observer DSN, an optional admin DSN (actions), its guard."""

    dsn: str
    admin_dsn: str | None = None
    access: WebAccess = field(default_factory=WebAccess)


def page_number(raw: str) -> int | None:
    """Read `?page=`: ASCII digits, 1 to 9999; anything else is None (answered 400)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _PAGE_DIGITS:
        return None
    number = int(raw)
    return number if number >= 1 else None


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["instant"] = format_instant
    env.filters["span"] = format_span
    env.globals["relative"] = format_relative
    return env


class _Console:
    """The pages and actions, over one reader and (optionally) one admin DSN."""

    def __init__(self, settings: ConsoleSettings, reader: ConsoleReader) -> None:
        self._settings = settings
        self._reader = reader
        self._env = _environment()
        self._csrf = CsrfToken()

    def _render(self, template: str, status_code: int = 200, **values: object) -> HTMLResponse:
        values.setdefault("actions", self._settings.admin_dsn is not None)
        values.setdefault("csrf", self._csrf.value)
        values.setdefault("has_alerts", self._reader.has_alerts())
        body = self._env.get_template(template).render(**values)
        return HTMLResponse(body, status_code=status_code)

    def schedules(self, request: Request) -> Response:
        raw = request.query_params.get("page", "1")
        number = page_number(raw)
        if number is None:
            return PlainTextResponse(f"page must be a number from 1, not {raw!r}", status_code=400)
        page = self._reader.schedules(number)
        return self._render("schedules.html", page=page, nav="schedules")

    def schedule(self, request: Request) -> Response:
        page = self._reader.schedule(int(request.path_params["schedule_id"]))
        if page is None:
            return PlainTextResponse("no such schedule", status_code=404)
        chart = lateness_chart(page)
        return self._render("schedule.html", page=page, chart=chart, nav="schedules")

    def replicas(self, _request: Request) -> Response:
        return self._render("replicas.html", page=self._reader.replicas(), nav="replicas")

    def workers(self, _request: Request) -> Response:
        return self._render("workers.html", page=self._reader.workers(), nav="workers")

    def alerts(self, _request: Request) -> Response:
        page = self._reader.alerts()
        if page is None:
            return PlainTextResponse("this database has no alerts table", status_code=404)
        return self._render("alerts.html", page=page, nav="alerts")

    def verify(self, _request: Request) -> Response:
        now_ms, result = self._reader.verify_result()
        return self._render("verify.html", now_ms=now_ms, result=result, nav="verify")

    async def act(self, request: Request) -> Response:
        action = str(request.path_params["action"])
        admin_dsn = self._settings.admin_dsn
        if admin_dsn is None or action not in _ACTIONS:
            return PlainTextResponse("not found", status_code=404)
        # A urlencoded form of one field, read without a multipart parser.
        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        if not self._csrf.matches(form.get("csrf", [None])[0]):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        schedule_id = int(request.path_params["schedule_id"])

        return await run_in_threadpool(self._act, admin_dsn, action, schedule_id)

    def _act(self, admin_dsn: str, action: str, schedule_id: int) -> Response:
        page = self._reader.schedule(schedule_id)
        if page is None:
            return PlainTextResponse("no such schedule", status_code=404)
        name = page.schedule.name
        try:
            with ScheduleAdmin(admin_dsn) as admin:
                if action == "pause":
                    admin.pause(name, reason="paused from the web console")
                elif action == "resume":
                    admin.resume(name)
                else:
                    admin.trigger_run(name, f"web-{uuid.uuid4().hex}")
        except QL3Error as exc:
            return PlainTextResponse(f"{action} {name!r}: {exc}", status_code=409)
        return RedirectResponse(f"/schedules/{schedule_id}", status_code=303)


def console_app(settings: ConsoleSettings, reader: ConsoleReader | None = None) -> Starlette:
    """Build the console for `settings` (a `ConsoleReader` on `settings.dsn` unless given).

    The reader is closed when the application shuts down.
    """
    owned = reader or ConsoleReader(settings.dsn)
    console = _Console(settings, owned)
    routes = [
        Route("/", console.schedules),
        Route("/schedules/{schedule_id:int}", console.schedule),
        Route("/schedules/{schedule_id:int}/{action:str}", console.act, methods=["POST"]),
        Route("/replicas", console.replicas),
        Route("/workers", console.workers),
        Route("/alerts", console.alerts),
        Route("/verify", console.verify),
        Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(AccessGuard, access=settings.access)],
        lifespan=_closing(owned),
    )


def _closing(reader: ConsoleReader) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Close `reader` when the application shuts down."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            reader.close()

    return lifespan
