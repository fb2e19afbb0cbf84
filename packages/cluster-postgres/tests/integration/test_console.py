"""The web console's reads as `ql3_observer` and the recorded verify verdict, on real PostgreSQL.

Rows are written as the product writes them (the admin adds, pauses and triggers; crafted runs
and attempts stand in for a replica and a worker) and each page must say exactly what the
tables hold, with every instant the database's.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres import (
    ConsoleReader,
    DatabaseError,
    ScheduleAdmin,
    record_verify_report,
    verify_history,
)
from ql3_runtime_core import ScheduleDefinition
from repo_helpers import db_now_ms, fetch

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

_RUN = (
    "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
    " created_at_ms) VALUES (%s, %s, %s, %s, gen_random_uuid(), %s) RETURNING id"
)
_ATTEMPT = (
    "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms,"
    " worker_id, exit_code, output_tail, started_at_ms, finished_at_ms, lease_expires_at_ms,"
    " lease_token, taken_lease_token, worker_login)"
    " VALUES (%s, %s, %s, %s, %s, 'w1', %s, %s, %s, %s, %s, %s, %s, 'w1-login')"
)


def _seed(db: Ql3Database) -> dict[str, int]:
    """Two schedules (one paused), three Runs of the first with its lateness, one running."""
    with ScheduleAdmin(db.dsn("admin")) as admin:
        kept = admin.add_schedule("kept", ScheduleDefinition(cron="* * * * *"))
        held = admin.add_schedule("held", ScheduleDefinition(cron="0 * * * *"))
        admin.pause("held", reason="backup window")
    now = db_now_ms(db.superuser_dsn)
    base = now - now % 60_000 - 180_000
    with psycopg.connect(db.superuser_dsn, autocommit=True) as conn:
        task = kept.task_id
        for index, (late, state, code, tail) in enumerate(
            [
                (100, "succeeded", 0, "ok 1"),
                (300, "failed", 2, "x" * 500),
                (200, "running", None, None),
            ]
        ):
            at = base + index * 60_000
            row = conn.execute(_RUN, (kept.schedule_id, task, at, f"r{index % 2}", at + late))
            run_id = row.fetchone()[0]  # type: ignore[index]
            done = None if state == "running" else at + late + 50
            lease = at + 600_000 if state == "running" else None
            token = uuid.uuid4() if state == "running" else None
            admitted = at + late
            values = (run_id, 1, state, admitted, admitted, code, tail, admitted, done, lease)
            conn.execute(_ATTEMPT, (*values, token, token))
    return {"kept": kept.schedule_id, "held": held.schedule_id}


def test_every_page_says_what_the_tables_hold(ql3_db: Ql3Database) -> None:
    """Schedules, one schedule, replicas and workers equal the seeded rows, by the DB clock."""
    ids = _seed(ql3_db)
    before = db_now_ms(ql3_db.superuser_dsn)
    with ConsoleReader(ql3_db.dsn("observer")) as reader:
        page = reader.schedules()
        after = db_now_ms(ql3_db.superuser_dsn)
        assert before <= page.now_ms <= after
        rows = {row.name: row for row in page.schedules}
        assert (rows["held"].state, rows["held"].pause_reason) == ("paused", "backup window")
        assert rows["held"].reason is not None
        assert "backup window" in rows["held"].reason
        kept = rows["kept"]
        assert (kept.state, kept.reason, kept.last_outcome) == ("active", None, "running")
        assert (kept.runs_last_hour, kept.lateness_p50_ms, kept.lateness_p99_ms) == (3, 200, 300)
        due = fetch(
            ql3_db.superuser_dsn,
            "SELECT next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s",
            [ids["kept"]],
        )
        assert kept.next_due_at_ms == due[0][0]
        one = reader.schedule(ids["kept"])
        assert one is not None
        counts = {(c.kind, c.outcome): c.runs for c in one.run_counts}
        assert counts == {("cron", "succeeded"): 1, ("cron", "failed"): 1, ("cron", "running"): 1}
        assert one.run_total == 3
        assert [r.state for r in one.runs] == ["running", "failed", "succeeded"]
        assert one.runs[1].output_tail == "x" * 400  # the tail, not the whole output
        assert sorted(p.lateness_ms for p in one.lateness) == [100, 200, 300]
        assert reader.schedule(10_000) is None
        replicas = reader.replicas()
        last = fetch(
            ql3_db.superuser_dsn,
            "SELECT owner_id, max(created_at_ms) FROM ql3.runs GROUP BY 1 ORDER BY 1",
        )
        assert [(a.owner_id, a.last_admitted_at_ms) for a in replicas.admissions] == last
        assert replicas.zone_rules_version is not None
        (running,) = reader.workers().running
        assert (running.name, running.worker_id) == ("kept", "w1")
        has_table = fetch(ql3_db.superuser_dsn, "SELECT to_regclass('ql3.alerts') IS NOT NULL")
        assert (reader.alerts() is not None) == has_table[0][0]


def test_pages_and_windows_bound_what_a_page_reads(ql3_db: Ql3Database) -> None:
    """Schedules come a page at a time by name; Run counts cover the latest Runs, the total all."""
    ids = _seed(ql3_db)
    with ConsoleReader(ql3_db.dsn("observer"), per_page=1, window=2) as reader:
        pages = [reader.schedules(number) for number in (1, 2, 3)]
        assert [[row.name for row in page.schedules] for page in pages] == [["held"], ["kept"], []]
        assert {(page.total, page.pages) for page in pages} == {(2, 2)}
        one = reader.schedule(ids["kept"])
        assert one is not None
        assert (one.run_total, one.window_runs) == (3, 2)
        counts = {(c.kind, c.outcome): c.runs for c in one.run_counts}
        assert counts == {("cron", "failed"): 1, ("cron", "running"): 1}
        assert len(one.runs) == 3  # the list of latest Runs keeps its own limit


def test_a_recorded_verdict_is_stamped_by_the_database(ql3_db: Ql3Database) -> None:
    """`record_verify_report` as the admin; the console shows it; the observer cannot write it."""
    _seed(ql3_db)
    report = verify_history(ql3_db.dsn("admin"))
    before = db_now_ms(ql3_db.superuser_dsn)
    recorded = record_verify_report(ql3_db.dsn("admin"), report)
    after = db_now_ms(ql3_db.superuser_dsn)
    with ConsoleReader(ql3_db.dsn("observer")) as reader:
        _, result = reader.verify_result()
    assert result is not None
    assert result.id == recorded
    assert before <= result.recorded_at_ms <= after
    assert (result.ok, result.schedules, result.runs) == (report.ok, report.schedules, report.runs)
    assert result.violation_total == sum(report.violation_counts.values())
    assert result.recorded_by.startswith("ql3_")  # the admin's login, as the database saw it
    with pytest.raises(DatabaseError):
        record_verify_report(ql3_db.dsn("observer"), report)


def test_the_observer_writes_nothing(ql3_db: Ql3Database) -> None:
    """Every write the console could want is refused to ql3_observer, read-only session or not."""
    ids = _seed(ql3_db)
    with psycopg.connect(ql3_db.dsn("observer"), autocommit=True) as conn:
        for statement in (
            "UPDATE ql3.trigger_schedules SET state = 'paused' WHERE id = "  # noqa: S608
            + str(ids["kept"]),
            "DELETE FROM ql3.runs",
            "SELECT payload_template FROM ql3.tasks",
            "SELECT * FROM ql3.events",
            "SELECT * FROM ql3.admin_pause_v1('kept', 'x', NULL, NULL)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement.encode())
