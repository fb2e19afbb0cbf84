"""Schema migrations (DESIGN §12): SQL files shipped in the wheel, each applied once, in order.

`migrations/NNNN_verb_phrase.sql` files are applied in name order, each in its own transaction,
under a session advisory lock (so concurrent runners apply each file once), as `ql3_owner` (so
every object belongs to it), and recorded in `ql3.schema_migrations` with their sha256 and the
database time. An applied file whose bytes changed is refused: migrations are forward-only. The
files are read by the package's one SQL loader (`_sql.migration_files`), the connection is made
by its one connection factory.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import psycopg
from psycopg import errors as pg_errors

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection
from ql3_cluster_postgres._errors import DatabaseError, MigrationTamperedError, SchemaMismatchError
from ql3_cluster_postgres._rows import named_row
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres._sql import migration_files, read_sql_folder

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
SCHEMA_VERSION: Final[int] = 7
_FILE_NAME = re.compile(r"(?P<version>\d{4})_[a-z0-9_]+\.sql")
_APPLICATION_NAME: Final = "ql3-migrate"


class _Applied(NamedTuple):
    name: str
    version: int
    sha256: str


class _Exists(NamedTuple):
    exists: bool


class _RoleName(NamedTuple):
    rolname: str


class _CanBecomeOwner(NamedTuple):
    can_become_owner: bool


class _Version(NamedTuple):
    version: int


_APPLIED = named_row(_Applied)
_EXISTS = named_row(_Exists)
_ROLE_NAME = named_row(_RoleName)
_CAN_BECOME_OWNER = named_row(_CanBecomeOwner)
_VERSION = named_row(_Version)


@dataclass(frozen=True)
class Migration:
    """One migration file: its name, number, SQL text and the sha256 of its bytes."""

    name: str
    version: int
    sql: str
    sha256: str


def load_migrations(source: Traversable | None = None) -> list[Migration]:
    """Read the migration files of `source` (default: the installed package) in version order.

    Raises:
        DatabaseError: a file name breaks the `NNNN_name.sql` rule or two files share a number.

    """
    shipped = migration_files() if source is None else read_sql_folder(source)
    found: list[Migration] = []
    for name, data in shipped.items():
        match = _FILE_NAME.fullmatch(name)
        if match is None:
            raise DatabaseError(f"migration file {name!r}: name is not NNNN_lowercase.sql")
        found.append(
            Migration(
                name=name,
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
        options = ConnectionOptions(dsn, application_name=_APPLICATION_NAME)
        with open_connection(options) as conn:
            _become_owner(conn)
            # A session lock (not a transaction one): it must span every file's own transaction.
            send(conn, "migrations_lock", folder="provisioning")
            try:
                return _apply_pending(conn, migrations)
            finally:
                send(conn, "migrations_unlock", folder="provisioning")
    except psycopg.Error as exc:
        raise DatabaseError(f"migrate: {exc}") from exc


def _become_owner(conn: psycopg.Connection[Any]) -> None:
    schema = send(conn, "migrations_schema_exists", rows=_EXISTS, folder="provisioning")
    schema_exists = any(row.exists for row in schema)
    owners = send(
        conn, "roles_existing", {"names": ["ql3_owner"]}, rows=_ROLE_NAME, folder="provisioning"
    )
    owner_exists = any(row.rolname == "ql3_owner" for row in owners)
    user, database = conn.info.user, conn.info.dbname
    if not (schema_exists and owner_exists):
        raise DatabaseError(f"migrate: {not_provisioned_message(user, database)}")
    allowed = send(
        conn, "migrations_can_become_owner", rows=_CAN_BECOME_OWNER, folder="provisioning"
    )
    if not any(row.can_become_owner for row in allowed):
        raise DatabaseError(
            f"migrate: user {user!r} is not a member of role ql3_owner; a superuser grants it"
            f" (GRANT ql3_owner TO {user})"
        )
    send(conn, "migrations_set_owner", folder="provisioning")


def _apply_pending(conn: psycopg.Connection[Any], migrations: list[Migration]) -> list[str]:
    send(conn, "migrations_create_ledger", folder="provisioning")
    ledger = send(conn, "migrations_applied", rows=_APPLIED, folder="provisioning")
    applied = {row.name: (row.version, row.sha256) for row in ledger}
    known = {migration.name: migration for migration in migrations}
    # Checked before anything is applied: a changed file means this build and the database
    # disagree about what the schema is, and applying more on top would hide it.
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
        # One transaction per file: the file and its ledger row land together or not at all, and
        # a failed file leaves the ones before it applied.
        with conn.transaction():
            # A packaged, checksummed file, not user input.
            conn.execute(migration.sql)
            send(
                conn,
                "migrations_record",
                {"name": migration.name, "version": migration.version, "sha256": migration.sha256},
                folder="provisioning",
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
            rows = send(conn, "migrations_version", rows=_VERSION, folder="provisioning")
            found = next((row.version for row in rows), 0)
    except pg_errors.UndefinedTable:
        # No ledger yet: a database never migrated is version 0, and refused like an old one.
        found = 0
    except psycopg.Error as exc:
        raise DatabaseError(f"check_schema_version: {exc}") from exc
    if found != SCHEMA_VERSION:
        raise SchemaMismatchError(found=found, expected=SCHEMA_VERSION)
    return found
