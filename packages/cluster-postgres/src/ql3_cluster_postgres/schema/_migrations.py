"""Schema migrations (DESIGN §12): SQL files shipped in the wheel, each applied once, in order.

`migrations/NNNN_verb_phrase.sql` files are applied in name order, each in its own transaction,
under a session advisory lock (so concurrent runners apply each file once), as `ql3_owner` (so
every object belongs to it), and recorded in `ql3.schema_migrations` with their sha256 and the
database time. An applied file whose bytes changed is refused: migrations are forward-only. The
files are read by the package's one SQL loader (`_sql.migration_files`), the connection is made
by its one connection factory.

Only a file's statements are forward-only, not its comments: `_COMMENT_EDITS` lists the earlier
checksums of files whose comments were reworded after release, each with the checksum of the
statements both versions share, so a database migrated by an earlier release keeps migrating
while any change to a statement is still refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from types import MappingProxyType
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
    from collections.abc import Mapping
    from importlib.resources.abc import Traversable

__all__ = [
    "SCHEMA_VERSION",
    "Migration",
    "check_schema_version",
    "load_migrations",
    "migrate",
]

# The schema version this build is made for: the highest migration number (a unit test pins it).
SCHEMA_VERSION: Final[int] = 18
_FILE_NAME = re.compile(r"(?P<version>\d{4})_[a-z0-9_]+\.sql")
_APPLICATION_NAME: Final = "ql3-migrate"

# Applied files whose whole-line comments were reworded after release (to cite docs/DESIGN.md
# instead of documents the repository never held): file -> {sha256 of the earlier bytes, which a
# database may hold in its ledger: sha256 of the statements (`statements_sha256`) of both}. A
# ledger digest listed here is accepted only while the shipped file's statements still hash to
# the listed value: edit a statement and the file is refused as tampered, as before.
_COMMENT_EDITS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "0001_create_schema.sql": {
            "fe807feed17fbdd9586085b3b5ca56224d219a824e08990a8ffc30d6fae5c442": (
                "91c7cfa1bd72a12fada3450069df74914fe41feeb14d9baea880c760835920ee"
            ),
        },
        "0002_grant_privileges.sql": {
            "c127c482bf881edefc8da0010c74ce19330aab28b63a2d207777f00dfa7f3bb1": (
                "e7c98f8ef91308c70b5f0f31f50aa4a2a643dc4b91dac16cb380cf8925c36e0c"
            ),
        },
        "0003_quarantine_and_zone_rules.sql": {
            "823c6afd0401ed13e3060da6a2e925f36b3798dc4ffbe7ec79684e40d8b754c8": (
                "9ab36aabb0640a77a60066ea6e62a999a2e66b4f93e90ceecfca4bc11727b073"
            ),
        },
        "0004_occurrence_accounting.sql": {
            "923da310ee1a0bf1dbc1a1bd20543df1cd8492f3b2edbec88e936536d58fc988": (
                "1d300d597da501fb65dad74ef2f7519abc0051d7648ff66c682370cb679f613e"
            ),
        },
        "0005_worker_execution.sql": {
            "0c750dc58d53727550a609897809e5df0f24c96c6abd0135e8e18688dd7a3ec4": (
                "9ccca43f5d5cb1276e2c3875ccf1714ea4d0c8e7d358a83761eeee02c826a2c5"
            ),
        },
    }
)


def statements_sha256(text: str) -> str:
    """Return the sha256 of `text` without its whole-line `--` comments (the rest byte-exact)."""
    kept = [line for line in text.split("\n") if not line.lstrip().startswith("--")]
    return hashlib.sha256("\n".join(kept).encode("utf-8")).hexdigest()


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

    def matches(self, recorded_sha256: str) -> bool:
        """Whether a ledger digest is this file or an earlier release's comment-only edit of it."""
        if recorded_sha256 == self.sha256:
            return True
        shared = _COMMENT_EDITS.get(self.name, {}).get(recorded_sha256)
        return shared is not None and shared == statements_sha256(self.sql)


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
        if name in known and not known[name].matches(digest):
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
