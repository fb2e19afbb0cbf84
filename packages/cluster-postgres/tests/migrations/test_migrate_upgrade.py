"""Upgrades from earlier schemas (DESIGN §12): existing rows stay accountable after `ql3 migrate`.

Each test migrates a fresh database only up to an earlier schema (the later files deleted from a
copy of the shipped folder), writes rows as that schema had them, then applies the rest.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg
import pytest
from migration_files import keep_up_to, seed_minute_schedule
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    ZoneRulesUnavailableError,
    adopt_zone_rules,
    migrate,
    read_zone_rule_history,
    record_zone_rules,
    verify_history,
)
from ql3_runtime_core import ClaimClusterScheduleCommand, ScheduleDefinition, zone_rules_version
from repo_helpers import db_now_ms, fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def test_upgrade_backfills_a_revision_for_existing_schedules(
    bare_db: Ql3Database, source: Path
) -> None:
    """Schedules older than schema 4 get a revision 1 'migrated' starting at their cursor."""
    keep_up_to(source, 2)
    migrate(bare_db.dsn("owner"), source=source)
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('old', 1)")
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1)")
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " next_due_at_ms, end_at_ms, updated_at_ms, created_at_ms)"
            " VALUES (1, 1, '*/5 * * * *', 'skip', 600000, 9000000, 1, 1)"
        )
    before = db_now_ms(bare_db.dsn("owner"))
    migrate(bare_db.dsn("owner"))
    rows = fetch(
        bare_db.dsn("admin"),
        "SELECT revision, reason, cron, misfire_policy, end_at_ms, first_cursor_ms,"
        " end_cursor_ms, ended_at_ms, created_at_ms FROM ql3.schedule_revisions",
    )
    assert len(rows) == 1
    assert rows[0][:8] == (1, "migrated", "*/5 * * * *", "skip", 9_000_000, 600_000, None, None)
    assert rows[0][8] >= before


def _migrate_as_ql3_migrate_does(database: Ql3Database) -> None:
    """Apply the pending migrations, then record (and store) this node's zone rules."""
    migrate(database.dsn("owner"))
    record_zone_rules(database.dsn("owner"))


def test_history_older_than_accounting_verifies_clean_after_the_upgrade(
    bare_db: Ql3Database, source: Path
) -> None:
    """Runs admitted under schema 2 are not judged by accounting; later occurrences are."""
    keep_up_to(source, 2)
    migrate(bare_db.dsn("owner"), source=source)
    now = db_now_ms(bare_db.dsn("owner"))
    first = now - now % 10_000 - 30_000
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('old', %s)", (first,))
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, %s)", (first,))
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " next_due_at_ms, updated_at_ms, created_at_ms)"
            " VALUES (1, 1, '*/10 * * * * *', 'catch_up', %s, %s, %s)",
            (first + 20_000, first + 10_005, first - 500),
        )
        for at in (first, first + 10_000):
            run = conn.execute(
                "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
                " claim_token, created_at_ms) VALUES (1, 1, %s, 'old', gen_random_uuid(), %s)"
                " RETURNING id",
                (at, at + 5),
            ).fetchone()
            assert run is not None
            attempt = conn.execute(
                "INSERT INTO ql3.attempts (run_id, created_at_ms, updated_at_ms)"
                " VALUES (%s, %s, %s) RETURNING id",
                (run[0], at + 5, at + 5),
            ).fetchone()
            assert attempt is not None
            for kind in ("run.admitted", "attempt.queued"):
                conn.execute(
                    "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
                    " VALUES (%s, %s, %s, %s)",
                    (run[0], attempt[0], kind, at + 5),
                )
    _migrate_as_ql3_migrate_does(bare_db)
    report = verify_history(bare_db.dsn("admin"))
    assert report.ok, report.lines()
    # Accounting starts at the cursor the schedule had at the upgrade.
    assert (report.admitted, report.expected, report.missing) == (2, 0, 0)


def test_upgrade_keeps_a_quarantined_schedule_accountable(
    bare_db: Ql3Database, source: Path
) -> None:
    """A schedule quarantined under schema 3 gets a migrated revision; verify passes once fixed."""
    keep_up_to(source, 3)
    migrate(bare_db.dsn("owner"), source=source)
    now = db_now_ms(bare_db.dsn("owner"))
    cursor = now - now % 60_000 + 60_000
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('bad', %s)", (now,))
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, %s)", (now,))
        # `R` passes the schema 3 shape CHECK; the dialect refuses it, so a replica quarantined it.
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " next_due_at_ms, state, invalid_reason, invalidated_at_ms, updated_at_ms,"
            " created_at_ms) VALUES (1, 1, 'R 9 * * *', 'skip', %s, 'invalid',"
            " 'InvalidCronError: R', %s, %s, %s)",
            (cursor, now, now, now),
        )
    _migrate_as_ql3_migrate_does(bare_db)
    migrated = fetch(
        bare_db.dsn("admin"),
        "SELECT revision, reason, cron, first_cursor_ms, ended_at_ms FROM ql3.schedule_revisions",
    )
    assert migrated == [(1, "migrated", "R 9 * * *", cursor, None)]
    quarantined = verify_history(bare_db.dsn("admin"))
    assert [v.rule for v in quarantined.violations] == ["invalid_schedule"]
    fixed = ScheduleDefinition(cron="0 9 * * *", timezone="UTC")
    with ScheduleAdmin(bare_db.dsn("admin")) as admin:
        admin.apply_schedules([ScheduleSpec(name="bad", definition=fixed)])
    revisions = fetch(
        bare_db.dsn("admin"),
        "SELECT revision, reason, first_cursor_ms, end_cursor_ms, ended_at_ms IS NULL"
        " FROM ql3.schedule_revisions ORDER BY revision",
    )
    assert [row[:2] for row in revisions] == [(1, "migrated"), (2, "replaced")]
    # The unreadable revision ended where it began: it covers no occurrence to account for.
    assert revisions[0][2:] == (cursor, cursor, False)
    assert revisions[1][4] is True
    report = verify_history(bare_db.dsn("admin"))
    assert report.ok, report.lines()


def _schema_3_database(database: Ql3Database, source: Path, zone_rules: str) -> int:
    """Migrate to schema 3, record `zone_rules` as that schema did, add one schedule (its id)."""
    keep_up_to(source, 3)
    migrate(database.dsn("owner"), source=source)
    now = db_now_ms(database.dsn("owner"))
    with psycopg.connect(database.dsn("owner"), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO ql3.zone_rules (version, recorded_at_ms, recorded_by)"
            " VALUES (%s, %s, 'old')",
            (zone_rules, now),
        )
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('old', %s)", (now,))
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, %s)", (now,))
        row = conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
            " updated_at_ms, created_at_ms) VALUES (1, 1, '0 9 * * *', %s, %s, %s) RETURNING id",
            (now - now % 86_400_000 + 86_400_000 + 9 * 3_600_000, now, now),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_upgrade_stores_the_data_of_the_recorded_version_when_this_node_has_it(
    bare_db: Ql3Database, source: Path
) -> None:
    """Recorded version = this node's: `ql3 migrate` stores its data and everything works."""
    _schema_3_database(bare_db, source, zone_rules_version())
    migrate(bare_db.dsn("owner"))
    stored = record_zone_rules(bare_db.dsn("owner"))
    assert (stored.previous, stored.stored_zones > 500) == (zone_rules_version(), True)
    (entry,) = read_zone_rule_history(bare_db.dsn("admin"))
    assert (entry.version, entry.zones) == (zone_rules_version(), stored.stored_zones)
    assert fetch(bare_db.dsn("admin"), "SELECT zone_rules_version FROM ql3.schedule_revisions") == [
        (zone_rules_version(),)
    ]
    with ScheduleAdmin(bare_db.dsn("admin")) as admin:
        admin.add_schedule("new", ScheduleDefinition(cron="0 9 * * *"))
    report = verify_history(bare_db.dsn("admin"))
    assert report.ok, report.lines()


def test_upgrade_with_another_recorded_version_refuses_until_adopt(
    bare_db: Ql3Database, source: Path
) -> None:
    """Recorded version without data: replicas, admin and verify refuse, then adopt cures it."""
    schedule_id = _schema_3_database(bare_db, source, "1999z")
    migrate(bare_db.dsn("owner"))
    kept = record_zone_rules(bare_db.dsn("owner"))
    assert (kept.previous, kept.stored_zones) == ("1999z", 0)
    with PostgresScheduleRepository(bare_db.dsn("runtime")) as repo:
        check = repo.read_cluster_state().zone_rules
        assert (check.agrees, check.recorded_version) == (False, "1999z")
        assert check.problem is not None
        assert "no rule data for tzdata 1999z" in check.problem
    with (
        ScheduleAdmin(bare_db.dsn("admin")) as admin,
        pytest.raises(ZoneRulesUnavailableError, match="ql3 zone-rules adopt") as refused,
    ):
        admin.add_schedule("new", ScheduleDefinition(cron="0 9 * * *"))
    assert "tzdata 1999z" in str(refused.value)
    assert f"tzdata {zone_rules_version()}" in str(refused.value)
    with pytest.raises(ZoneRulesUnavailableError, match="1999z"):
        verify_history(bare_db.dsn("admin"))
    change = adopt_zone_rules(bare_db.dsn("admin"))
    # Nothing tells which zones changed: every cursor is placed anew under the new rules.
    assert (change.previous, change.old_rules_known) == ("1999z", False)
    assert [move.schedule_id for move in change.moves] == [schedule_id]
    assert [row.version for row in read_zone_rule_history(bare_db.dsn("admin"))] == [
        "1999z",
        zone_rules_version(),
    ]
    with PostgresScheduleRepository(bare_db.dsn("runtime")) as repo:
        command = ClaimClusterScheduleCommand(owner_id="new", claim_token=uuid.uuid4())
        assert repo.claim_round(command, 16).zone_rules.agrees
    report = verify_history(bare_db.dsn("admin"))
    assert report.ok, report.lines()


def test_upgrade_to_manual_runs_keeps_one_run_per_occurrence(
    bare_db: Ql3Database, source: Path
) -> None:
    """Runs of schema 7 become cron Runs; their occurrence key still refuses a second Run."""
    keep_up_to(source, 7)
    migrate(bare_db.dsn("owner"), source=source)
    seed_minute_schedule(bare_db.dsn("owner"), run=("old", 60005))
    _migrate_as_ql3_migrate_does(bare_db)
    assert fetch(bare_db.dsn("admin"), "SELECT kind, request_id, payload FROM ql3.runs") == [
        ("cron", None, None)
    ]
    with (
        psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.UniqueViolation, match="runs_occurrence_unique"),
    ):
        conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (1, 1, 60000, 'again', gen_random_uuid(), 60006)"
        )
    with ScheduleAdmin(bare_db.dsn("admin")) as admin:
        run = admin.trigger_run("old", "after-upgrade")
    assert (run.schedule_id, run.existed) == (1, False)


def test_upgrade_to_backfill_keeps_the_kinds_and_the_occurrence_key(
    bare_db: Ql3Database, source: Path
) -> None:
    """Cron and manual Runs of schema 8 keep their kind; a backfilled Run meets the same key."""
    keep_up_to(source, 8)
    migrate(bare_db.dsn("owner"), source=source)
    seed_minute_schedule(bare_db.dsn("owner"), run=("old", 60005))
    _migrate_as_ql3_migrate_does(bare_db)
    assert fetch(bare_db.dsn("admin"), "SELECT kind, backfill_id FROM ql3.runs") == [("cron", None)]
    with (
        psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.UniqueViolation, match="runs_occurrence_unique"),
    ):
        conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms, kind, backfill_id) VALUES (1, 1, 60000, 'again',"
            " gen_random_uuid(), 60006, 'backfill', 1)"
        )
