"""Least-privilege role provisioning (DESIGN §11): group roles, schema ownership, login users.

Group roles are cluster-global, the schema and its ACL belong to one database. Table grants are
not here but in `migrations/0002_grant_privileges.sql`, run as `ql3_owner`, so grants always match
the tables the ledger says exist. Provisioning may run concurrently from several processes (test
suites, replicas started together): an advisory lock serialises it within a database and a short
retry (`PROVISIONING_RETRY`, the package's one retry policy) absorbs the race on cluster-global
role creation across databases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

import psycopg
from psycopg import sql

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection
from ql3_cluster_postgres._errors import DatabaseError, UnknownRoleError
from ql3_cluster_postgres._retry import PROVISIONING_RETRY
from ql3_cluster_postgres._rows import named_row
from ql3_cluster_postgres._send import send

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "GROUP_ROLES",
    "ROLE_NAMES",
    "create_login_user",
    "group_role_name",
    "not_provisioned_message",
    "provision_roles",
    "provision_roles_if_missing",
    "scram_verifier",
]

ROLE_NAMES: Final = ("owner", "admin", "runtime", "worker_ingress", "observer")
GROUP_ROLES: Final = tuple(f"ql3_{role}" for role in ROLE_NAMES)
_APPLICATION_NAME: Final = "ql3-roles"
# What libpq's PQencryptPasswordConn is asked for: the verifier PostgreSQL 10+ stores by default.
_SCRAM_ALGORITHM: Final = b"scram-sha-256"


class _RoleName(NamedTuple):
    rolname: str


class _Exists(NamedTuple):
    exists: bool


class _ProvisioningState(NamedTuple):
    roles_present: bool
    schema_present: bool
    superuser: bool


_ROLE_NAME = named_row(_RoleName)
_EXISTS = named_row(_Exists)
_STATE = named_row(_ProvisioningState)


def group_role_name(role: str) -> str:
    """Map "runtime" or "ql3_runtime" to the group role "ql3_runtime".

    Raises:
        UnknownRoleError: any other name (a `ValueError`).

    """
    name = role if role.startswith("ql3_") else f"ql3_{role}"
    if name not in GROUP_ROLES:
        raise UnknownRoleError(role)
    return name


def _with_retry(dsn: str, action: str, body: Callable[[psycopg.Connection[Any]], None]) -> None:
    """Run `body(conn)` in one transaction under the provisioning lock, retrying role races.

    Raises:
        DatabaseError: a statement failed, or the races outlasted the retries.

    """
    options = ConnectionOptions(dsn, application_name=_APPLICATION_NAME)

    def attempt(_retries: int) -> None:
        # A fresh connection per try: a failed CREATE ROLE race aborts the whole transaction.
        with open_connection(options) as conn, conn.transaction():
            # Serialises provisioning within this database; roles are cluster-global, so two
            # databases provisioning at once can still race, which the retry absorbs.
            send(conn, "roles_lock", folder="provisioning")
            body(conn)

    try:
        PROVISIONING_RETRY.call(attempt)
    except psycopg.Error as exc:
        raise DatabaseError(f"{action}: {exc}") from exc


def provision_roles(superuser_dsn: str) -> list[str]:
    """Create the five NOLOGIN group roles and prepare the database of `superuser_dsn`.

    Idempotent. Afterwards schema `ql3` is owned by `ql3_owner`, PUBLIC has no privilege in it
    nor CONNECT on the database, and the QL3 groups may connect. Run `migrate` next: it creates
    the tables and grants the groups their table privileges.

    Returns:
        What was done, one line per step for people: each group role created (or found), the
        schema, its grants, the database's CONNECT privilege.

    Raises:
        DatabaseError: the statements failed (e.g. the user is not a superuser).

    """
    steps: list[str] = []

    def body(conn: psycopg.Connection[Any]) -> None:
        names = send(
            conn,
            "roles_existing",
            {"names": list(GROUP_ROLES)},
            rows=_ROLE_NAME,
            folder="provisioning",
        )
        existing = {row.rolname for row in names}
        schema = send(conn, "migrations_schema_exists", rows=_EXISTS, folder="provisioning")
        schema_existed = any(row.exists for row in schema)
        send(conn, "roles_create_groups", folder="provisioning")
        send(conn, "roles_prepare_schema", folder="provisioning")
        # GRANT ... ON DATABASE takes no parameter: the name goes in as a quoted identifier.
        send(
            conn,
            "roles_database_acl",
            folder="provisioning",
            fill={"database": sql.Identifier(conn.info.dbname)},
        )
        # A retried transaction reports what its last (committed) try did.
        steps[:] = _provisioning_steps(existing, schema_existed=schema_existed, db=conn.info.dbname)

    _with_retry(superuser_dsn, "provision_roles", body)
    return steps


def _provisioning_steps(existing: set[str], *, schema_existed: bool, db: str) -> list[str]:
    roles = [
        f"role {name} already exists (NOLOGIN group, attributes checked)"
        if name in existing
        else f"created role {name} (NOLOGIN group)"
        for name in GROUP_ROLES
    ]
    schema = "schema ql3 already exists" if schema_existed else "created schema ql3"
    return [
        *roles,
        f"{schema}, owned by ql3_owner",
        (
            "granted USAGE on schema ql3 to ql3_admin, ql3_runtime, ql3_worker_ingress,"
            " ql3_observer (not PUBLIC)"
        ),
        f"granted CONNECT on database {db} to the five QL3 groups; revoked it from PUBLIC",
    ]


def not_provisioned_message(user: str, database: str) -> str:
    """Say what to run when a database lacks the QL3 roles or schema and `user` cannot add them."""
    return (
        f"database {database!r} has no QL3 roles or no schema ql3, and user {user!r} may not"
        " create them: run `ql3 roles provision` as a superuser first (or `ql3 migrate` as a"
        " superuser, which provisions them itself)"
    )


def provision_roles_if_missing(dsn: str) -> list[str]:
    """Provision the database of `dsn` when it lacks the QL3 group roles or schema; say so.

    The first step of `ql3 migrate`, so that a fresh database takes one command: when a group
    role or the schema is missing and the login is a superuser, this is `provision_roles` and
    returns its steps; a provisioned database is left alone (an empty list). Only a superuser
    qualifies: provisioning resets role attributes (NOSUPERUSER, NOBYPASSRLS), which PostgreSQL
    refuses to any other role, CREATEROLE included.

    Raises:
        DatabaseError: roles or schema missing and the login is not a superuser (the message
            names `ql3 roles provision`), or a statement failed.

    """
    options = ConnectionOptions(dsn, application_name=_APPLICATION_NAME)
    try:
        with open_connection(options) as conn, conn.cursor(row_factory=_STATE) as cursor:
            state = send(
                cursor,
                "roles_provisioning_state",
                {"names": list(GROUP_ROLES)},
                folder="provisioning",
            ).fetchone()
            user, database = conn.info.user, conn.info.dbname
    except psycopg.Error as exc:
        raise DatabaseError(f"migrate: {exc}") from exc
    if state is None or (state.roles_present and state.schema_present):
        # Provisioned already: leave the roles' attributes and grants as the operator set them.
        return []
    if not state.superuser:
        raise DatabaseError(f"migrate: {not_provisioned_message(user, database)}")
    return provision_roles(dsn)


def scram_verifier(conn: psycopg.Connection[Any], name: str, password: str) -> str:
    """Return the SCRAM-SHA-256 verifier of `password` for role `name`, computed client-side."""
    verifier = conn.pgconn.encrypt_password(password.encode(), name.encode(), _SCRAM_ALGORITHM)
    return verifier.decode("ascii")


def create_login_user(superuser_dsn: str, name: str, password: str, group: str | None) -> None:
    """Create (or update) login user `name` with `password`, member of QL3 group `group`.

    Idempotent: a rerun sets the password again and adds the membership. `group` is a role name
    ("runtime") or group name ("ql3_runtime"); None makes a user in no QL3 group (tests of PUBLIC).

    Raises:
        UnknownRoleError: unknown group.
        DatabaseError: the statements failed.

    """
    group_name = group_role_name(group) if group is not None else None

    def body(conn: psycopg.Connection[Any]) -> None:
        # CREATE/ALTER ROLE take no bind parameters: the name is quoted as an identifier and the
        # password as a literal by psycopg, never pasted into the text. What is sent is the
        # SCRAM-SHA-256 verifier libpq computes here (as psql's \password does), never the
        # password itself: a statement log, pg_stat_activity or an error message on the server
        # can only ever show the verifier.
        params = {
            "name": sql.Identifier(name),
            "password": sql.Literal(scram_verifier(conn, name, password)),
        }
        found = send(conn, "roles_exists", {"name": name}, rows=_EXISTS, folder="provisioning")
        exists = any(row.exists for row in found)
        template = "roles_alter_login" if exists else "roles_create_login"
        send(conn, template, folder="provisioning", fill=params)
        if group_name is not None:
            send(
                conn,
                "roles_grant_group",
                folder="provisioning",
                fill={"group": sql.Identifier(group_name), "name": sql.Identifier(name)},
            )

    _with_retry(superuser_dsn, f"create_login_user {name!r}", body)
