"""Schema migrations (SPEC §4): plain SQL files shipped in the wheel, applied once each, in order.

`migrations/NNNN_verb_phrase.sql` files are applied in name order, each in its own transaction,
under a session advisory lock (so concurrent runners apply each file once), as `ql3_owner` (so
every object belongs to it), and recorded in `ql3.schema_migrations` with their sha256 and the
database time. An applied file whose bytes changed is refused: migrations are forward-only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import scalar_row

from ._ddl import ddl
from ._errors import DatabaseError, MigrationTamperedError, SchemaMismatchError
from ._roles import not_provisioned_message

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "SCHEMA_VERSION",
    "Migration",
    "check_schema_version",
    "load_migrations",
    "migrate",
]

# The schema version this build is made for: the highest migration number (a unit test pins it).
SCHEMA_VERSION: Final[int] = 5
_FILE_NAME = re.compile(r"(?P<version>\d{4})_[a-z0-9_]+\.sql")


@dataclass(frozen=True)
class Migration:
    """One migration file: its name, number, SQL text and the sha256 of its bytes."""

    name: str
    version: int
    sql: str
    sha256: str


def _default_source() -> Traversable:
    return files(__package__) / "migrations"


def load_migrations(source: Traversable | None = None) -> list[Migration]:
    """Read the migration files of `source` (default: the installed package) in version order.

    Raises:
        DatabaseError: a file name breaks the `NNNN_name.sql` rule or two files share a number.

    """
    folder = source if source is not None else _default_source()
    found: list[Migration] = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_NAME.fullmatch(entry.name)
        if match is None:
            raise DatabaseError(f"migration file {entry.name!r}: name is not NNNN_lowercase.sql")
        data = entry.read_bytes()
        found.append(
            Migration(
                name=entry.name,
                version=int(match["version"]),
                sql=data.decode("utf-8"),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if len(set(versions)) != len(versions):
        raise DatabaseError(f"migration numbers must be unique, found {versions}")
    return found


def migrate(dsn: str, *, source: Traversable | None = None) -> list[str]:
    """Apply pending migrations to the database of `dsn`; return the names applied (maybe none).

    The login user must be a member of `ql3_owner` (or a superuser) and the schema `ql3` must
    exist: run `provision_roles` (`ql3 roles provision`) first, or `provision_roles_if_missing`
    as `ql3 migrate` does.

    Raises:
        MigrationTamperedError: an applied file changed (nothing is applied then).
        SchemaMismatchError: the database has migrations newer than this build knows.
        DatabaseError: connection or statement failure.

    """
    migrations = load_migrations(source)
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            _become_owner(conn)
            conn.execute(ddl("migrations_lock"))
            try:
                return _apply_pending(conn, migrations)
            finally:
                conn.execute(ddl("migrations_unlock"))
    except psycopg.Error as exc:
        raise DatabaseError(f"migrate: {exc}") from exc


def _become_owner(conn: psycopg.Connection[Any]) -> None:
    flags = conn.cursor(row_factory=scalar_row)
    schema = flags.execute(ddl("migrations_schema_exists")).fetchone()
    owner = flags.execute(ddl("roles_existing"), {"names": ["ql3_owner"]}).fetchone()
    user, database = conn.info.user, conn.info.dbname
    if not (schema and owner):
        raise DatabaseError(f"migrate: {not_provisioned_message(user, database)}")
    if not flags.execute(ddl("migrations_can_become_owner")).fetchone():
        raise DatabaseError(
            f"migrate: user {user!r} is not a member of role ql3_owner; a superuser grants it"
            f" (GRANT ql3_owner TO {user})"
        )
    conn.execute(ddl("migrations_set_owner"))


def _apply_pending(conn: psycopg.Connection[Any], migrations: list[Migration]) -> list[str]:
    conn.execute(ddl("migrations_create_ledger"))
    applied = {
        str(name): (int(version), str(digest))
        for name, version, digest in conn.execute(ddl("migrations_applied")).fetchall()
    }
    known = {migration.name: migration for migration in migrations}
    for name, (_, digest) in applied.items():
        if name in known and known[name].sha256 != digest:
            raise MigrationTamperedError(name, digest, known[name].sha256)
    newest = max((version for version, _ in applied.values()), default=0)
    highest_known = max((migration.version for migration in migrations), default=0)
    if newest > highest_known:
        raise SchemaMismatchError(found=newest, expected=highest_known)
    done: list[str] = []
    for migration in migrations:
        if migration.name in applied:
            continue
        with conn.transaction():
            # A packaged, checksummed file, not user input.
            conn.execute(migration.sql)
            conn.execute(
                ddl("migrations_record"),
                {"name": migration.name, "version": migration.version, "sha256": migration.sha256},
            )
        done.append(migration.name)
    return done


def check_schema_version(conn: psycopg.Connection[Any]) -> int:
    """Return the database's schema version if it is `SCHEMA_VERSION`, else refuse.

    Works for every QL3 role (all may read the ledger). Runs inside the caller's transaction
    (a savepoint when one is open).

    Raises:
        SchemaMismatchError: older (including no ledger at all) or newer than this build.
        DatabaseError: the query failed for another reason.

    """
    try:
        with conn.transaction():
            row = conn.execute(ddl("migrations_version")).fetchone()
        found = int(row[0]) if row else 0
    except pg_errors.UndefinedTable:
        found = 0
    except psycopg.Error as exc:
        raise DatabaseError(f"check_schema_version: {exc}") from exc
    if found != SCHEMA_VERSION:
        raise SchemaMismatchError(found=found, expected=SCHEMA_VERSION)
    return found
