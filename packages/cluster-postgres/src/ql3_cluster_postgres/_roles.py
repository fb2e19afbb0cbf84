"""Least-privilege role provisioning (SPEC §5): group roles, schema ownership, login users.

Group roles are cluster-global, the schema and its ACL belong to one database. Table grants are
not here but in `migrations/0002_grant_privileges.sql`, run as `ql3_owner`, so grants always match
the tables the ledger says exist. Provisioning may run concurrently from several processes (test
suites, replicas started together): an advisory lock serialises it within a database and a short
retry absorbs the race on cluster-global role creation across databases.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row, scalar_row

from ._ddl import ddl
from ._errors import DatabaseError, UnknownRoleError

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
]

ROLE_NAMES: Final = ("owner", "admin", "runtime", "worker_ingress")
GROUP_ROLES: Final = tuple(f"ql3_{role}" for role in ROLE_NAMES)
_RETRIES: Final = 5
# Concurrent CREATE/ALTER ROLE in two databases: duplicate name or "tuple concurrently updated".
_RACES = (pg_errors.DuplicateObject, pg_errors.UniqueViolation, pg_errors.InternalError)


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
    """Run `body(conn)` in one transaction under the provisioning lock, retrying role races."""
    for attempt in range(_RETRIES):
        try:
            with psycopg.connect(dsn, connect_timeout=10) as conn, conn.transaction():
                conn.execute(ddl("roles_lock"))
                body(conn)
        except _RACES:
            if attempt == _RETRIES - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
        except psycopg.Error as exc:
            raise DatabaseError(f"{action}: {exc}") from exc
        else:
            return


def provision_roles(superuser_dsn: str) -> list[str]:
    """Create the four NOLOGIN group roles and prepare the database of `superuser_dsn`.

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
        names = conn.cursor(row_factory=scalar_row)
        existing = set(names.execute(ddl("roles_existing"), {"names": list(GROUP_ROLES)}))
        schema_existed = bool(names.execute(ddl("migrations_schema_exists")).fetchone())
        conn.execute(ddl("roles_create_groups"))
        conn.execute(ddl("roles_prepare_schema"))
        acl = sql.SQL(ddl("roles_database_acl")).format(database=sql.Identifier(conn.info.dbname))
        conn.execute(acl)
        # A retried transaction reports what its last (committed) try did.
        steps[:] = _provisioning_steps(existing, schema_existed=schema_existed, db=conn.info.dbname)

    try:
        _with_retry(superuser_dsn, "provision_roles", body)
    except _RACES as exc:
        raise DatabaseError(f"provision_roles: {exc}") from exc
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
        "granted USAGE on schema ql3 to ql3_admin, ql3_runtime, ql3_worker_ingress (not PUBLIC)",
        f"granted CONNECT on database {db} to the four QL3 groups; revoked it from PUBLIC",
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
    try:
        with (
            psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn,
            conn.cursor(row_factory=dict_row) as cursor,
        ):
            state = cursor.execute(
                ddl("roles_provisioning_state"), {"names": list(GROUP_ROLES)}
            ).fetchone()
            user, database = conn.info.user, conn.info.dbname
    except psycopg.Error as exc:
        raise DatabaseError(f"migrate: {exc}") from exc
    if state is None or (state["roles_present"] and state["schema_present"]):
        return []
    if not state["superuser"]:
        raise DatabaseError(f"migrate: {not_provisioned_message(user, database)}")
    return provision_roles(dsn)


def create_login_user(superuser_dsn: str, name: str, password: str, group: str | None) -> None:
    """Create (or update) login user `name` with `password`, member of QL3 group `group`.

    Idempotent: a rerun sets the password again and adds the membership. `group` is a role name
    ("runtime") or group name ("ql3_runtime"); None makes a user in no QL3 group (tests of PUBLIC).

    Raises:
        UnknownRoleError: unknown group.
        DatabaseError: the statements failed.

    """
    group_name = group_role_name(group) if group is not None else None
    params = {"name": sql.Identifier(name), "password": sql.Literal(password)}

    def body(conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(ddl("roles_exists"), {"name": name}).fetchone()
        template = ddl("roles_alter_login") if row and row[0] else ddl("roles_create_login")
        conn.execute(sql.SQL(template).format(**params))
        if group_name is not None:
            grant = sql.SQL(ddl("roles_grant_group")).format(
                group=sql.Identifier(group_name), name=sql.Identifier(name)
            )
            conn.execute(grant)

    try:
        _with_retry(superuser_dsn, f"create_login_user {name!r}", body)
    except _RACES as exc:
        raise DatabaseError(f"create_login_user {name!r}: {exc}") from exc
