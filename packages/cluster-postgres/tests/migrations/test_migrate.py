"""Migrations against real PostgreSQL (DESIGN §12): apply once, in order, fenced by a ledger."""

from __future__ import annotations

import hashlib
import threading
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from migration_files import keep_up_to
from ql3_cluster_postgres import (
    SCHEMA_VERSION,
    DatabaseError,
    MigrationTamperedError,
    SchemaMismatchError,
    check_schema_version,
    migrate,
)
from ql3_cluster_postgres.schema._migrations import _COMMENT_EDITS
from repo_helpers import db_now_ms

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def _next_file(phrase: str) -> str:
    """Name a migration file one past the shipped ones (the number a next release would take)."""
    return f"{SCHEMA_VERSION + 1:04d}_{phrase}.sql"


def _shipped_names() -> list[str]:
    folder = files("ql3_cluster_postgres") / "migrations"
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))


def _ledger(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT name, version, sha256, applied_at_ms FROM ql3.schema_migrations ORDER BY 2"
        ).fetchall()


def test_fresh_apply_records_every_file(bare_db: Ql3Database) -> None:
    """A fresh database gets every file in order; the ledger holds sha256 and database time."""
    owner = bare_db.dsn("owner")
    before = db_now_ms(owner)
    applied = migrate(owner)
    after = db_now_ms(owner)
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
    keep_up_to(source, 1)
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
