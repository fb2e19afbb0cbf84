"""Migrations against real PostgreSQL (DESIGN §12): apply once, in order, fenced by a ledger."""

from __future__ import annotations

import hashlib
import shutil
import threading
import uuid
from importlib.resources import as_file, files
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from ql3_cluster_postgres import (
    SCHEMA_VERSION,
    DatabaseError,
    MigrationTamperedError,
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    SchemaMismatchError,
    ZoneRulesUnavailableError,
    adopt_zone_rules,
    check_schema_version,
    migrate,
    provision_roles,
    read_zone_rule_history,
    record_zone_rules,
    verify_history,
)
from ql3_cluster_postgres.schema._migrations import _COMMENT_EDITS
from ql3_runtime_core import ClaimClusterScheduleCommand, ScheduleDefinition, zone_rules_version
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

NOW_MS = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _next_file(phrase: str) -> str:
    """Name a migration file one past the shipped ones (the number a next release would take)."""
    return f"{SCHEMA_VERSION + 1:04d}_{phrase}.sql"


def _shipped_names() -> list[str]:
    folder = files("ql3_cluster_postgres") / "migrations"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))


@pytest.fixture
def bare_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a provisioned database with no migration applied (login users already exist)."""
    assert ql3_template  # the template created the cluster-wide login users
    name = f"ql3_bare_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = Ql3Database(name=name, superuser_dsn=pg_cluster.dsn(name))
    provision_roles(database.superuser_dsn)
    yield database
    drop_database(pg_cluster, name)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """Return a writable copy of the shipped migrations folder."""
    target = tmp_path / "migrations"
    with as_file(files("ql3_cluster_postgres") / "migrations") as shipped:
        shutil.copytree(shipped, target)
    return target


def _ledger(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT name, version, sha256, applied_at_ms FROM ql3.schema_migrations ORDER BY 2"
        ).fetchall()


def _now_ms(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(NOW_MS).fetchone()
    assert row is not None
    return int(row[0])


def test_fresh_apply_records_every_file(bare_db: Ql3Database) -> None:
    """A fresh database gets every file in order; the ledger holds sha256 and database time."""
    owner = bare_db.dsn("owner")
    before = _now_ms(owner)
    applied = migrate(owner)
    after = _now_ms(owner)
    assert applied == _shipped_names()
    ledger = _ledger(owner)
    folder = files("ql3_cluster_postgres") / "migrations"
    assert [(row[0], row[1], row[2]) for row in ledger] == [
        (name, int(name[:4]), hashlib.sha256((folder / name).read_bytes()).hexdigest())
        for name in applied
    ]
    assert all(before <= row[3] <= after for row in ledger)
    with psycopg.connect(bare_db.dsn("runtime")) as conn:
        assert check_schema_version(conn) == SCHEMA_VERSION


def test_reapply_is_a_no_op(ql3_db: Ql3Database) -> None:
    """Migrating an up-to-date database applies nothing and leaves the ledger untouched."""
    before = _ledger(ql3_db.dsn("owner"))
    assert migrate(ql3_db.dsn("owner")) == []
    assert _ledger(ql3_db.dsn("owner")) == before


def test_objects_belong_to_the_owner_even_when_a_superuser_migrates(
    bare_db: Ql3Database,
) -> None:
    """Migrations run as ql3_owner (SET ROLE), so a superuser run still yields owner objects."""
    migrate(bare_db.superuser_dsn)
    with psycopg.connect(bare_db.superuser_dsn) as conn:
        owners = conn.execute(
            "SELECT DISTINCT c.relowner::regrole::text FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ql3'"
        ).fetchall()
    assert owners == [("ql3_owner",)]


def test_tampered_applied_file_is_refused(ql3_db: Ql3Database, source: Path) -> None:
    """Changing an applied file is refused, naming the file and both checksums; nothing runs."""
    first = source / "0001_create_schema.sql"
    recorded = hashlib.sha256(first.read_bytes()).hexdigest()
    first.write_text(first.read_text() + "\n-- edited after release\n")
    current = hashlib.sha256(first.read_bytes()).hexdigest()
    (source / _next_file("add_probe")).write_text("CREATE TABLE ql3.probe (x int);\n")
    with pytest.raises(MigrationTamperedError) as caught:
        migrate(ql3_db.dsn("owner"), source=source)
    message = str(caught.value)
    assert "0001_create_schema.sql" in message
    assert recorded in message
    assert current in message
    assert len(_ledger(ql3_db.dsn("owner"))) == len(_shipped_names())


def _record_digest(dsn: str, name: str, digest: str) -> None:
    """Make the ledger say `name` was applied with `digest` (as an earlier release recorded it)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE ql3.schema_migrations SET sha256 = %s WHERE name = %s", (digest, name))


def _earlier_digests() -> list[tuple[str, str]]:
    # The shipped table of comment-only edits: the data under test, not the rule that reads it.
    return [(name, digest) for name, earlier in _COMMENT_EDITS.items() for digest in earlier]


@pytest.mark.parametrize(("name", "digest"), _earlier_digests())
def test_a_database_migrated_before_a_comment_edit_keeps_migrating(
    ql3_db: Ql3Database, source: Path, name: str, digest: str
) -> None:
    """An earlier release's checksum of a file whose comments alone changed since is accepted."""
    assert digest != hashlib.sha256((source / name).read_bytes()).hexdigest()
    _record_digest(ql3_db.superuser_dsn, name, digest)
    (source / _next_file("add_probe")).write_text("CREATE TABLE ql3.probe (x int);\n")
    assert migrate(ql3_db.dsn("owner"), source=source) == [_next_file("add_probe")]


def test_an_earlier_digest_does_not_excuse_a_changed_statement(
    ql3_db: Ql3Database, source: Path
) -> None:
    """The earlier checksum is accepted only while the statements are the ones it was made of."""
    name, digest = _earlier_digests()[0]
    _record_digest(ql3_db.superuser_dsn, name, digest)
    edited = source / name
    edited.write_text(edited.read_text() + "\nCREATE TABLE ql3.smuggled (x int);\n")
    (source / _next_file("add_probe")).write_text("CREATE TABLE ql3.probe (x int);\n")
    with pytest.raises(MigrationTamperedError, match=digest):
        migrate(ql3_db.dsn("owner"), source=source)
    assert len(_ledger(ql3_db.dsn("owner"))) == len(_shipped_names())


def test_newer_database_is_refused(ql3_db: Ql3Database, source: Path) -> None:
    """A database migrated past this build is refused by the check and by migrate, naming both."""
    (source / _next_file("add_probe")).write_text("CREATE TABLE ql3.probe (x int);\n")
    assert migrate(ql3_db.dsn("owner"), source=source) == [_next_file("add_probe")]
    newer = SCHEMA_VERSION + 1
    with psycopg.connect(ql3_db.dsn("runtime")) as conn:
        with pytest.raises(SchemaMismatchError) as caught:
            check_schema_version(conn)
        assert (caught.value.found, caught.value.expected) == (newer, SCHEMA_VERSION)
        assert f"database schema version {newer}, this build expects {SCHEMA_VERSION}" in str(
            caught.value
        )
    with pytest.raises(SchemaMismatchError, match=f"version {newer}"):
        migrate(ql3_db.dsn("owner"))


def test_older_database_is_refused(bare_db: Ql3Database, source: Path) -> None:
    """A database behind this build (or with no ledger) is refused, naming both versions."""
    with (
        psycopg.connect(bare_db.dsn("admin")) as conn,
        pytest.raises(SchemaMismatchError, match=f"version 0, this build expects {SCHEMA_VERSION}"),
    ):
        check_schema_version(conn)
    for path in source.iterdir():
        if not path.name.startswith("0001_"):
            path.unlink()
    assert migrate(bare_db.dsn("owner"), source=source) == ["0001_create_schema.sql"]
    with psycopg.connect(bare_db.dsn("worker_ingress")) as conn:
        with pytest.raises(SchemaMismatchError) as caught:
            check_schema_version(conn)
        assert (caught.value.found, caught.value.expected) == (1, SCHEMA_VERSION)
        assert f"database schema version 1, this build expects {SCHEMA_VERSION}" in str(
            caught.value
        )


def test_check_inside_an_open_transaction_keeps_it_usable(ql3_db: Ql3Database) -> None:
    """The version check runs in a savepoint: the caller's transaction continues afterwards."""
    with psycopg.connect(ql3_db.dsn("runtime")) as conn:
        conn.execute("SELECT 1")
        assert check_schema_version(conn) == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM ql3.runs").fetchone() == (0,)


def test_failed_migration_leaves_nothing_behind(ql3_db: Ql3Database, source: Path) -> None:
    """A file that fails halfway is rolled back entirely and not recorded."""
    (source / _next_file("half_broken")).write_text(
        "CREATE TABLE ql3.half (x int);\nSELECT no_such_function();\n"
    )
    with pytest.raises(DatabaseError, match="no_such_function"):
        migrate(ql3_db.dsn("owner"), source=source)
    assert len(_ledger(ql3_db.dsn("owner"))) == len(_shipped_names())
    with psycopg.connect(ql3_db.dsn("owner")) as conn:
        assert conn.execute("SELECT to_regclass('ql3.half')").fetchone() == (None,)


def test_badly_named_file_is_refused(ql3_db: Ql3Database, source: Path) -> None:
    """A migration file not named NNNN_lowercase.sql is refused before anything runs."""
    (source / "3_Oops.sql").write_text("SELECT 1;\n")
    with pytest.raises(DatabaseError, match=r"3_Oops\.sql"):
        migrate(ql3_db.dsn("owner"), source=source)


def test_concurrent_migrations_apply_each_file_once(bare_db: Ql3Database) -> None:
    """Two threads migrating the same fresh database at once apply every file exactly once."""
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(migrate(bare_db.dsn("owner")))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sorted(name for applied in results for name in applied) == _shipped_names()
    assert [row[0] for row in _ledger(bare_db.dsn("owner"))] == _shipped_names()


def test_upgrade_backfills_a_revision_for_existing_schedules(
    bare_db: Ql3Database, source: Path
) -> None:
    """Schedules older than schema 4 get a revision 1 'migrated' starting at their cursor."""
    for path in source.iterdir():
        if not path.name.startswith(("0001_", "0002_")):
            path.unlink()
    migrate(bare_db.dsn("owner"), source=source)
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('old', 1)")
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1)")
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " next_due_at_ms, end_at_ms, updated_at_ms, created_at_ms)"
            " VALUES (1, 1, '*/5 * * * *', 'skip', 600000, 9000000, 1, 1)"
        )
    before = _now_ms(bare_db.dsn("owner"))
    migrate(bare_db.dsn("owner"))
    rows = _rows(
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


def _rows(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(statement).fetchall()


def test_history_older_than_accounting_verifies_clean_after_the_upgrade(
    bare_db: Ql3Database, source: Path
) -> None:
    """Runs admitted under schema 2 are not judged by accounting; later occurrences are."""
    for path in source.iterdir():
        if not path.name.startswith(("0001_", "0002_")):
            path.unlink()
    migrate(bare_db.dsn("owner"), source=source)
    now = _now_ms(bare_db.dsn("owner"))
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
    for path in source.iterdir():
        if not path.name.startswith(("0001_", "0002_", "0003_")):
            path.unlink()
    migrate(bare_db.dsn("owner"), source=source)
    now = _now_ms(bare_db.dsn("owner"))
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
    migrated = _rows(
        bare_db.dsn("admin"),
        "SELECT revision, reason, cron, first_cursor_ms, ended_at_ms FROM ql3.schedule_revisions",
    )
    assert migrated == [(1, "migrated", "R 9 * * *", cursor, None)]
    quarantined = verify_history(bare_db.dsn("admin"))
    assert [v.rule for v in quarantined.violations] == ["invalid_schedule"]
    fixed = ScheduleDefinition(cron="0 9 * * *", timezone="UTC")
    with ScheduleAdmin(bare_db.dsn("admin")) as admin:
        admin.apply_schedules([ScheduleSpec(name="bad", definition=fixed)])
    revisions = _rows(
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
    for path in source.iterdir():
        if not path.name.startswith(("0001_", "0002_", "0003_")):
            path.unlink()
    migrate(database.dsn("owner"), source=source)
    now = _now_ms(database.dsn("owner"))
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
    assert _rows(bare_db.dsn("admin"), "SELECT zone_rules_version FROM ql3.schedule_revisions") == [
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
