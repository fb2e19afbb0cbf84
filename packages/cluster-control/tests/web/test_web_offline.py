"""The console's parts that need no database: exposure, the guard, the CSRF token, formatting.

These run in the `web` session (the extra installed), like the browser test beside them.
"""

# Throwaway credentials of consoles that never listen.
# ruff: noqa: S106

from __future__ import annotations

import asyncio
import base64
import re
from typing import TYPE_CHECKING, Any

import pytest
from ql3_cluster_control._config import ConfigurationError
from ql3_cluster_control.web import (
    WebAccess,
    check_exposure,
    format_instant,
    format_relative,
    format_span,
    is_loopback,
    parse_basic_auth,
    parse_bind,
)
from ql3_cluster_control.web._app import _environment, page_number
from ql3_cluster_control.web._format import lateness_chart
from ql3_cluster_control.web._guard import AccessGuard, CsrfToken
from ql3_cluster_postgres import AlertsPage, ReplicasPage, SchedulePage, SchedulesPage, WorkersPage

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_guard(host: str) -> None:
    """Loopback binds start without a credential."""
    assert is_loopback(host)
    check_exposure(host, WebAccess())


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "console.example"])  # noqa: S104
def test_the_network_needs_a_token_or_basic_auth(host: str) -> None:
    """Beyond loopback: refused without a guard, accepted with either kind."""
    assert not is_loopback(host)
    with pytest.raises(ConfigurationError, match="--token or --basic-auth"):
        check_exposure(host, WebAccess())
    check_exposure(host, WebAccess(token="t"))
    check_exposure(host, WebAccess(basic_user="u", basic_password="p"))


def test_the_cli_refuses_an_unguarded_network_bind(usage_error: Callable[[list[str]], str]) -> None:
    """`ql3 web --bind 0.0.0.0:8080` exits 2 in one line, before connecting anywhere."""
    line = usage_error(["web", "--bind", "0.0.0.0:8080", "--dsn", "host=/nonexistent"])
    assert "--token or --basic-auth" in line


def test_bind_and_basic_auth_parse() -> None:
    """HOST:PORT, [v6]:PORT and a bare host; USER:PASSWORD with both parts."""
    assert parse_bind("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert parse_bind("[::1]:8081") == ("::1", 8081)
    assert parse_bind("localhost") == ("localhost", 8080)
    with pytest.raises(ValueError, match="outside"):
        parse_bind("127.0.0.1:70000")
    assert parse_basic_auth("ops:pa:ss") == ("ops", "pa:ss")
    for bad in ("ops", ":x", "ops:"):
        with pytest.raises(ConfigurationError, match="USER:PASSWORD"):
            parse_basic_auth(bad)


def test_times_are_the_database_instants_given() -> None:
    """An instant is formatted as given (UTC), a relative time is a difference of two."""
    assert format_instant(1_765_000_000_123) == "2025-12-06 05:46:40.123Z"
    assert format_instant(None) == "-"
    assert format_span(850) == "850 ms"
    assert format_span(12_340) == "12.3 s"
    assert format_span(270_000) == "4.5 min"
    assert format_relative(10_500, 7_300) == "in 3.2 s"
    assert format_relative(3_000, 7_000) == "4.0 s ago"


def test_the_chart_scales_lateness_oldest_first() -> None:
    """The polyline runs oldest to newest and its tallest point touches the top."""
    page = SchedulePage.model_validate(
        {
            "now_ms": 10_000,
            "schedule": _schedule_row(),
            "run_total": 0,
            "window_runs": 1_000,
            "run_counts": [],
            "runs": [],
            "skips": [],
            "lateness": [
                {"scheduled_for_ms": 3_000, "lateness_ms": 50},
                {"scheduled_for_ms": 1_000, "lateness_ms": 100},
            ],
        }
    )
    chart = lateness_chart(page, width=100, height=10)
    assert (chart.count, chart.max_ms, chart.first_ms, chart.last_ms) == (2, 100, 1_000, 3_000)
    assert chart.points == "0.0,0.0 100.0,5.0"


def _schedule_row() -> dict[str, Any]:
    fields = (
        "invalid_reason pause_reason pause_cause paused_by paused_at_ms paused_until_ms"
        " start_at_ms end_at_ms next_due_at_ms claim_owner_id last_run_id last_scheduled_for_ms"
        " last_outcome last_exit_code lateness_p50_ms lateness_p99_ms"
    )
    return {
        **dict.fromkeys(fields.split()),
        "now_ms": 10_000,
        "schedule_id": 1,
        "name": "s",
        "cron": "* * * * * *",
        "timezone": "UTC",
        "misfire_policy": "fire_once",
        "overlap": "allow",
        "state": "active",
        "runs_last_hour": 0,
    }


def _status(access: WebAccess, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> int:
    """Send one request through the guard to an app that answers 200; the status returned."""
    sent: list[dict[str, Any]] = []

    async def app(_scope: Any, _receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": headers, "query_string": query}
    asyncio.run(AccessGuard(app, access)(scope, receive, send))
    return int(sent[0]["status"])


def test_the_guard_checks_token_and_basic_auth() -> None:
    """Right credentials pass; missing or wrong ones get 401; no guard lets all through."""
    token = WebAccess(token="tok")
    assert _status(WebAccess(), []) == 200
    assert _status(token, []) == 401
    assert _status(token, [(b"authorization", b"Bearer tok")]) == 200
    assert _status(token, [(b"authorization", b"Bearer nope")]) == 401
    assert _status(token, [(b"cookie", b"ql3_console_token=tok")]) == 200
    assert _status(token, [], query=b"token=tok") == 200
    assert _status(token, [], query=b"token=bad") == 401
    basic = WebAccess(basic_user="ops", basic_password="pw")
    good = b"Basic " + base64.b64encode(b"ops:pw")
    bad = b"Basic " + base64.b64encode(b"ops:no")
    assert _status(basic, [(b"authorization", good)]) == 200
    assert _status(basic, [(b"authorization", bad)]) == 401
    assert _status(basic, [(b"authorization", b"Basic !!!")]) == 401


def test_the_csrf_token_matches_only_itself() -> None:
    """Each process has its own token; a form must echo it exactly."""
    first, second = CsrfToken(), CsrfToken()
    assert first.value != second.value
    assert first.matches(first.value)
    assert not first.matches(second.value)
    assert not first.matches(None)
    assert not first.matches("")


def _pages() -> dict[str, dict[str, Any]]:
    """One sample of every page's values, as the reader returns them (no database)."""
    row = _schedule_row() | {"state": "invalid", "invalid_reason": "unknown zone", "name": "b"}
    schedule = SchedulePage.model_validate(
        {
            "now_ms": 10_000,
            "schedule": row,
            "run_total": 3,
            "window_runs": 1_000,
            "run_counts": [{"kind": "cron", "outcome": "skipped", "runs": 3}],
            "runs": [
                {
                    "run_id": 7, "kind": "cron", "scheduled_for_ms": 1_000,
                    "created_at_ms": 1_050, "owner_id": "r1", "attempt_id": 9,
                    "attempt_number": 1, "state": "succeeded", "worker_id": "w1",
                    "started_at_ms": 1_060, "finished_at_ms": 1_090, "exit_code": 0,
                    "output_tail": "<b>hello</b>",
                }
            ],
            "skips": [
                {
                    "skip_id": 4, "reason": "overlap", "misfire_policy": None,
                    "first_skipped_ms": 2_000, "last_skipped_ms": 2_000, "skipped_count": 1,
                    "owner_id": None, "created_at_ms": 2_100,
                }
            ],
            "lateness": [{"scheduled_for_ms": 1_000, "lateness_ms": 50}],
        }
    )  # fmt: skip
    return {
        "schedules.html": {
            "page": SchedulesPage(
                now_ms=10_000, page=1, per_page=50, total=1, schedules=(schedule.schedule,)
            ),
            "nav": "schedules",
        },
        "schedule.html": {
            "page": schedule,
            "chart": lateness_chart(schedule),
            "nav": "schedules",
            "actions": True,
        },
        "replicas.html": {
            "page": ReplicasPage.model_validate(
                {
                    "now_ms": 10_000,
                    "claims": [
                        {
                            "now_ms": 10_000,
                            "schedule_id": 1,
                            "name": "b",
                            "claim_owner_id": "r1",
                            "claimed_at_ms": 9_000,
                            "claim_expires_at_ms": 14_000,
                        }
                    ],
                    "admissions": [{"owner_id": "r1", "last_admitted_at_ms": 9_500}],
                    "zone_rules_version": "2026a",
                    "zone_rules_recorded_at_ms": 5,
                }
            ),
            "nav": "replicas",
        },
        "workers.html": {"page": WorkersPage(now_ms=10_000, running=()), "nav": "workers"},
        "alerts.html": {
            "page": AlertsPage(
                now_ms=10_000,
                columns=("id", "kind", "created_at_ms"),
                alerts=({"id": 1, "kind": "missed", "created_at_ms": 9_000},),
            ),
            "nav": "alerts",
        },
        "verify.html": {"now_ms": 10_000, "result": None, "nav": "verify"},
    }


@pytest.mark.parametrize("template", sorted(_pages()))
def test_every_template_renders_database_instants_escaped(template: str) -> None:
    """Each page renders from its values alone: instants as given, output escaped, no script."""
    values = {"actions": False, "csrf": "tok", "has_alerts": False} | _pages()[template]
    html = _environment().get_template(template).render(**values)
    assert 'id="as-of">1970-01-01 00:00:10.000Z<' in html
    assert "<script" not in html
    assert "http://" not in html
    assert "https://" not in html
    assert "<b>hello</b>" not in html
    assert ('name="csrf" value="tok"' in html) == (template == "schedule.html")


@pytest.mark.parametrize(
    ("number", "total", "prev", "next_"),
    [(1, 1, None, None), (1, 120, None, 2), (2, 120, 1, 3), (3, 120, 2, None), (9, 120, 3, None)],
)
def test_the_schedules_page_links_its_neighbours(
    number: int, total: int, prev: int | None, next_: int | None
) -> None:
    """Previous/next links go to existing pages only; a page past the last links back to it."""
    page = SchedulesPage(now_ms=10_000, page=number, per_page=50, total=total, schedules=())
    values = {"actions": False, "csrf": "tok", "has_alerts": False, "page": page}
    html = _environment().get_template("schedules.html").render(nav="schedules", **values)
    assert f'data-pages="{-(-total // 50)}"' in html
    found_prev = re.search(r'href="/\?page=(\d+)" rel="prev"', html)
    found_next = re.search(r'href="/\?page=(\d+)" rel="next"', html)
    assert (int(found_prev[1]) if found_prev else None) == prev
    assert (int(found_next[1]) if found_next else None) == next_


@pytest.mark.parametrize(
    ("raw", "number"),
    [("1", 1), ("20", 20), ("9999", 9999), ("0", None), ("-1", None), ("10000", None),
     ("", None), ("2.5", None), ("\u00b2", None), ("\u0663", None), ("x", None)],
)  # fmt: skip
def test_the_page_number_is_ascii_digits_from_one(raw: str, number: int | None) -> None:
    """Superscripts and other scripts' digits are refused, not turned into a server error."""
    assert page_number(raw) == number
