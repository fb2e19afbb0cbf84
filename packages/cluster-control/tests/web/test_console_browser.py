"""The web console in a real headless browser: Debian's chromium, driven by Playwright.

A chaos-style run first: two `ql3 run` replicas and a `ql3 worker` (real processes) serve four
schedules every second: one healthy, one paused by an operator, one quarantined (a row no
replica can read, planted by SQL) and one whose 1.5 s command overlaps its next occurrence
under `--overlap skip`. Once all four show what they should, everything stops and the verdict
is recorded (`ql3 verify --record`). Then the console, served as `ql3_observer`, is read in
chromium and every cell the test looks at must equal the database's state read as the
superuser: states and reasons, next due instants, last outcomes, lateness percentiles, Run
counts by outcome, skip records, last admission per owner, the zone rules version, running
attempts, the recorded verdict. The action forms are exercised too (a pause through the page
lands in the database; a POST without the CSRF token is refused). The schedules page is saved
as docs/console.png (README shows it).
"""

from __future__ import annotations

import shutil
import signal
import socket
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fix_db import db_now_ms, run_ql3, sql_rows, wait_for
from history import plant_schedule
from playwright.sync_api import Page, sync_playwright
from ql3_cluster_control.web import ConsoleServer, ConsoleSettings, WebAccess

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fix_replicas import Replicas
    from fix_workers import Workers
    from ql3_testkit import Ql3Database

EVERY_SECOND = "* * * * * *"
LEASE = ("--lease-ms", "4000", "--poll-interval-ms", "500")
SCREENSHOT = Path(__file__).resolve().parents[4] / "docs" / "console.png"
HOUR_MS = 3_600_000
TOKEN = "console-test-token"  # noqa: S105  # a throwaway console's credential


def _chromium() -> str:
    """Return the system chromium (scripts/setup.sh installs Debian's); never a download."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("no chromium on PATH: run scripts/setup.sh as root (apt-get install chromium)")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ql3(*args: str) -> str:
    result = run_ql3(*args)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def _scalar(db: Ql3Database, statement: str, params: Any = None) -> Any:
    return sql_rows(db.superuser_dsn, statement, params)[0][0]


_COLUMNS = {
    name: f"SELECT {name} FROM ql3.trigger_schedules WHERE id = %s"  # noqa: S608  # fixed names
    for name in ("state", "next_due_at_ms", "invalid_reason")
}


def _column(db: Ql3Database, column: str, schedule_id: int) -> Any:
    """Read one column of one schedule row as the superuser."""
    return _scalar(db, _COLUMNS[column], [schedule_id])


def _ids(db: Ql3Database) -> dict[str, int]:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT t.name, s.id FROM ql3.trigger_schedules s JOIN ql3.tasks t ON t.id = s.task_id",
    )
    return dict(rows)


def _run_history(db: Ql3Database, replicas: Replicas, workers: Workers) -> dict[str, int]:
    """Serve four schedules with real replicas and a worker until each shows its case; stop."""
    admin = db.dsn("admin")
    _ql3("schedule", "add", "steady", "--cron", EVERY_SECOND, "--command", "echo steady-tick",
         "--dsn", admin)  # fmt: skip
    _ql3("schedule", "add", "overlapping", "--cron", EVERY_SECOND, "--command", "sleep 1.5",
         "--overlap", "skip", "--dsn", admin)  # fmt: skip
    _ql3("schedule", "add", "held", "--cron", EVERY_SECOND, "--command", "true", "--dsn", admin)
    _ql3("schedule", "pause", "held", "--reason", "maintenance window", "--dsn", admin)
    plant_schedule(db.superuser_dsn, "broken", cron=EVERY_SECOND, timezone="Mars/Olympus")
    ids = _ids(db)
    runtime = db.dsn("runtime")
    replicas.start("r1", runtime, *LEASE)
    replicas.start("r2", runtime, *LEASE)
    workers.start("w1", db, "--lease-ms", "5000")
    replicas.wait_ready("r1", "r2")

    def settled() -> bool:
        done = _scalar(
            db,
            "SELECT count(*) FROM ql3.runs r JOIN ql3.attempts a ON a.run_id = r.id"
            " WHERE r.schedule_id = %s AND a.state = 'succeeded'",
            [ids["steady"]],
        )
        overlap_skips = _scalar(
            db,
            "SELECT count(*) FROM ql3.runs r JOIN ql3.attempts a ON a.run_id = r.id"
            " WHERE r.schedule_id = %s AND a.state = 'skipped'",
            [ids["overlapping"]],
        )
        broken = _scalar(
            db, "SELECT state FROM ql3.trigger_schedules WHERE id = %s", [ids["broken"]]
        )
        return bool(done >= 4 and overlap_skips >= 1 and broken == "invalid")

    wait_for(settled, timeout_s=90, what="runs, an overlap skip and a quarantine")
    replicas.stop_all()
    workers.signal("w1", signal.SIGTERM)
    workers.wait_exit("w1")
    # The quarantined schedule is a violation (`invalid_schedule`): verify exits 1, and records.
    recorded = run_ql3("verify", "--record", "--lease-ms", "4000", "--dsn", admin)
    assert recorded.returncode == 1, recorded.stderr
    assert "recorded as verdict" in recorded.stderr
    return ids


@pytest.fixture
def console(ql3_db: Ql3Database) -> Iterator[str]:
    """Serve the console as ql3_observer (actions through the admin) on a free loopback port."""
    settings = ConsoleSettings(dsn=ql3_db.dsn("observer"), admin_dsn=ql3_db.dsn("admin"))
    server = ConsoleServer(settings, "127.0.0.1", _free_port())
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _cell(page: Page, row: str, field: str) -> Any:
    return page.locator(f"{row} [data-field='{field}']")


def _last_outcomes(db: Ql3Database) -> dict[str, str | None]:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT t.name, (SELECT a.state FROM ql3.runs r JOIN ql3.attempts a ON a.run_id = r.id"
        "  WHERE r.schedule_id = s.id ORDER BY r.scheduled_for_ms DESC, a.attempt_number DESC"
        "  LIMIT 1) FROM ql3.trigger_schedules s JOIN ql3.tasks t ON t.id = s.task_id",
    )
    return dict(rows)


def _lateness(db: Ql3Database, schedule_id: int, now_ms: int) -> tuple[str, str]:
    p50, p99 = sql_rows(
        db.superuser_dsn,
        "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY late),"
        " percentile_disc(0.99) WITHIN GROUP (ORDER BY late)"
        " FROM (SELECT created_at_ms - scheduled_for_ms AS late FROM ql3.runs"
        "  WHERE schedule_id = %s AND kind = 'cron' AND scheduled_for_ms >= %s"
        "  ORDER BY scheduled_for_ms DESC LIMIT 100) AS recent",
        [schedule_id, now_ms - HOUR_MS],
    )[0]
    return ("" if p50 is None else str(p50)), ("" if p99 is None else str(p99))


def test_the_console_shows_what_the_database_holds(
    ql3_db: Ql3Database, replicas: Replicas, workers: Workers, console: str
) -> None:
    """Every cell checked in chromium equals the database after a real run; actions land."""
    ids = _run_history(ql3_db, replicas, workers)
    db = ql3_db
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=_chromium(), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            before = db_now_ms(db.superuser_dsn)
            page.goto(f"{console}/")
            after = db_now_ms(db.superuser_dsn)
            # The page's time is the database's, read while the page was built.
            shown = page.locator("#as-of").inner_text()
            assert before // 1000 <= _epoch_s(shown) <= after // 1000 + 1, shown

            _check_schedules_page(page, db, ids, after)
            has_alerts = _scalar(db, "SELECT to_regclass('ql3.alerts') IS NOT NULL")
            assert page.locator("#nav-alerts").count() == (1 if has_alerts else 0)
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            _check_schedule_page(page, console, db, ids["overlapping"])
            _check_replicas_and_workers(page, console, db)
            page.goto(f"{console}/verify")
            ok, total, counts = sql_rows(
                db.superuser_dsn,
                "SELECT ok, violation_total, violation_counts FROM ql3.verify_results"
                " ORDER BY id DESC LIMIT 1",
            )[0]
            assert (ok, counts.get("invalid_schedule")) == (False, 1)
            assert page.locator("#verify-verdict").inner_text() == f"{total} violations"
            assert page.locator("#violation-counts tbody tr").count() == len(counts)

            # An action through the page lands in the database (as the admin, by its clock).
            page.goto(f"{console}/schedules/{ids['steady']}")
            page.locator("#action-pause").click()
            page.wait_for_url(f"{console}/schedules/{ids['steady']}")
            assert page.locator("#state").inner_text() == "paused"
            assert _column(db, "state", ids["steady"]) == "paused"
        finally:
            browser.close()
    # A POST without the CSRF token changes nothing.
    request = urllib.request.Request(  # noqa: S310  # loopback, the console under test
        f"{console}/schedules/{ids['held']}/resume", data=b"csrf=forged", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    refused.value.close()  # the error holds the response: close its socket
    assert refused.value.code == 403
    assert _column(db, "state", ids["held"]) == "paused"


def _check_schedules_page(page: Page, db: Ql3Database, ids: dict[str, int], now_ms: int) -> None:
    """State, reason, next due, last outcome and lateness of every schedule equal the tables."""
    states = dict(
        sql_rows(
            db.superuser_dsn,
            "SELECT t.name, s.state FROM ql3.trigger_schedules s"
            " JOIN ql3.tasks t ON t.id = s.task_id",
        )
    )
    assert states == {
        "steady": "active",
        "overlapping": "active",
        "held": "paused",
        "broken": "invalid",
    }
    assert page.locator("#schedule-total").get_attribute("data-total") == str(len(states))
    assert page.locator("#pager-top").get_attribute("data-pages") == "1"
    outcomes = _last_outcomes(db)
    for name, state in states.items():
        row = f"tr[data-schedule='{name}']"
        assert _cell(page, row, "state").inner_text() == state
        due = _column(db, "next_due_at_ms", ids[name])
        assert _cell(page, row, "next-due").get_attribute("data-ms") == str(due)
        outcome = outcomes[name]
        assert _cell(page, row, "last-outcome").inner_text().startswith(outcome or "-")
        p50, p99 = _lateness(db, ids[name], now_ms)
        lateness = _cell(page, row, "lateness")
        assert (lateness.get_attribute("data-p50"), lateness.get_attribute("data-p99")) == (
            p50,
            p99,
        )
    reason = _column(db, "invalid_reason", ids["broken"])
    assert reason
    assert _cell(page, "tr[data-schedule='broken']", "reason").inner_text() == reason
    assert "maintenance window" in _cell(page, "tr[data-schedule='held']", "reason").inner_text()


def _epoch_s(shown: str) -> int:
    """Read the page's `YYYY-MM-DD HH:MM:SS.mmmZ` back to epoch seconds (no clock is read)."""
    return int(datetime.fromisoformat(shown).timestamp())


def _check_schedule_page(page: Page, console: str, db: Ql3Database, schedule_id: int) -> None:
    """Run counts by outcome, skip records and the chart of one schedule equal the tables."""
    page.goto(f"{console}/schedules/{schedule_id}")
    counts = sql_rows(
        db.superuser_dsn,
        "SELECT r.kind, coalesce((SELECT a.state FROM ql3.attempts a WHERE a.run_id = r.id"
        " ORDER BY a.attempt_number DESC LIMIT 1), 'none') AS outcome, count(*)"
        " FROM (SELECT id, kind FROM ql3.runs WHERE schedule_id = %s"
        "  ORDER BY scheduled_for_ms DESC LIMIT 1000) r GROUP BY 1, 2",
        [schedule_id],
    )
    assert counts
    total = _scalar(db, "SELECT count(*) FROM ql3.runs WHERE schedule_id = %s", [schedule_id])
    assert page.locator("#run-window").get_attribute("data-total") == str(total)
    shown_rows = page.locator("#run-counts tbody tr")
    assert shown_rows.count() == len(counts)
    for kind, outcome, runs in counts:
        cell = page.locator(f"#run-counts tr[data-kind='{kind}'][data-outcome='{outcome}'] td")
        assert cell.nth(2).inner_text() == str(runs)
    assert any(outcome == "skipped" for _, outcome, _ in counts)
    skips = _scalar(
        db, "SELECT count(*) FROM ql3.skipped_occurrences WHERE schedule_id = %s", [schedule_id]
    )
    assert page.locator("#skips tr[data-skip]").count() == min(skips, 50)
    cron_runs = _scalar(
        db, "SELECT count(*) FROM ql3.runs WHERE schedule_id = %s AND kind = 'cron'", [schedule_id]
    )
    chart = page.locator("#lateness-chart")
    assert chart.get_attribute("data-points") == str(min(cron_runs, 200))
    assert page.locator("#lateness-chart polyline").count() == 1
    # Output tails are shown with their attempts: the overlapping command prints nothing, the
    # page lists one row per attempt of the latest Runs.
    attempts = _scalar(
        db,
        "SELECT count(*) FROM ql3.attempts a JOIN (SELECT id FROM ql3.runs WHERE schedule_id = %s"
        " ORDER BY scheduled_for_ms DESC LIMIT 50) r ON r.id = a.run_id",
        [schedule_id],
    )
    assert page.locator("#runs tbody tr").count() == attempts


def _check_replicas_and_workers(page: Page, console: str, db: Ql3Database) -> None:
    """Last admission per owner, zone rules version and running attempts equal the tables."""
    page.goto(f"{console}/replicas")
    admissions = sql_rows(
        db.superuser_dsn, "SELECT owner_id, max(created_at_ms) FROM ql3.runs GROUP BY owner_id"
    )
    assert admissions
    assert {owner for owner, _ in admissions} <= {"r1", "r2"}
    for owner, last in admissions:
        cell = page.locator(f"#admissions tr[data-owner='{owner}'] [data-field='last']")
        assert cell.get_attribute("data-ms") == str(last)
    assert page.locator("#admissions tr[data-owner]").count() == len(admissions)
    version = _scalar(db, "SELECT version FROM ql3.zone_rules")
    assert page.locator("#zone-rules").inner_text() == version
    live = _scalar(
        db,
        "SELECT count(*) FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL"
        " AND claim_expires_at_ms > floor(extract(epoch FROM clock_timestamp()) * 1000)",
    )
    assert page.locator("#claims tr[data-owner]").count() == live
    page.goto(f"{console}/workers")
    running = _scalar(db, "SELECT count(*) FROM ql3.attempts WHERE state = 'running'")
    assert page.locator("#running tr[data-attempt]").count() == running


def test_a_guarded_console_asks_for_its_token(ql3_db: Ql3Database) -> None:
    """With --token, a request without it is refused (401); with it, the page is served."""
    settings = ConsoleSettings(dsn=ql3_db.dsn("observer"), access=WebAccess(token=TOKEN))
    server = ConsoleServer(settings, "127.0.0.1", _free_port())
    server.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.url}/", timeout=10)  # noqa: S310  # loopback
        refused.value.close()
        assert refused.value.code == 401
        request = urllib.request.Request(  # noqa: S310
            f"{server.url}/", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            assert answer.status == 200
            assert b'id="schedules"' in answer.read()
        # Without an admin DSN no action exists: the forms are absent and a POST is not found.
        post = urllib.request.Request(  # noqa: S310
            f"{server.url}/schedules/1/pause",
            data=b"csrf=x",
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        with pytest.raises(urllib.error.HTTPError) as absent:
            urllib.request.urlopen(post, timeout=10)  # noqa: S310
        absent.value.close()
        assert absent.value.code == 404
    finally:
        server.stop()
