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

from ._ddl import ddl
from ._errors import DatabaseError, UnknownRoleError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "GROUP_ROLES",
    "ROLE_NAMES",
    "create_login_user",
    "group_role_name",
    "provision_roles",
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


def provision_roles(superuser_dsn: str) -> None:
    """Create the four NOLOGIN group roles and prepare the database of `superuser_dsn`.

    Idempotent. Afterwards schema `ql3` is owned by `ql3_owner`, PUBLIC has no privilege in it
    nor CONNECT on the database, and the QL3 groups may connect. Run `migrate` next: it creates
    the tables and grants the groups their table privileges.

    Raises:
        DatabaseError: the statements failed (e.g. the user is not a superuser).

    """

    def body(conn: psycopg.Connection[Any]) -> None:
        conn.execute(ddl("roles_create_groups"))
        conn.execute(ddl("roles_prepare_schema"))
        acl = sql.SQL(ddl("roles_database_acl")).format(database=sql.Identifier(conn.info.dbname))
        conn.execute(acl)

    try:
        _with_retry(superuser_dsn, "provision_roles", body)
    except _RACES as exc:
        raise DatabaseError(f"provision_roles: {exc}") from exc


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
