"""Databases ready for QL3 on a throwaway cluster: roles, login users, migrated schema.

Tests, benchmarks and chaos runs get their databases here (the demo sets up its own, with the
product's functions only). Login users are
cluster-global (`ql3_login_<role>`); their passwords are derived from the cluster's superuser
password, so a `Ql3Database` (or a subprocess handed only its superuser DSN) can rebuild every
role's DSN without a side channel.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from ql3_cluster_postgres import (
    ROLE_NAMES,
    DatabaseError,
    UnknownRoleError,
    create_login_user,
    migrate,
    provision_roles,
    record_zone_rules,
)

from ._sql import statement


class PrivateServer(Protocol):
    """What database set-up needs of a server: a `ThrowawayCluster` or a `PatroniCluster`."""

    superuser_password: str

    def dsn(self, dbname: str = ...) -> str:
        """Return the superuser conninfo of `dbname`."""
        ...

    def connect(self, dbname: str = ...) -> psycopg.Connection[Any]:
        """Open an autocommit superuser connection to `dbname`."""
        ...


__all__ = [
    "Ql3Database",
    "drop_database",
    "login_password",
    "login_user_name",
    "prepare_ql3_database",
]

_CLONE_TIMEOUT_S = 30.0


def login_user_name(role: str) -> str:
    """Name the login user provisioned for a QL3 role: "runtime" -> "ql3_login_runtime"."""
    return f"ql3_login_{role}"


def login_password(superuser_password: str, role: str) -> str:
    """Derive the password of `login_user_name(role)` from the superuser password."""
    return hashlib.sha256(f"ql3-login:{role}:{superuser_password}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Ql3Database:
    """A migrated QL3 database on a throwaway cluster, with a login user per role."""

    __module__ = "ql3_testkit"

    name: str
    superuser_dsn: str

    def dsn(self, role: str, **params: str) -> str:
        """Conninfo for the login user of `role` (owner, admin, runtime, worker_ingress), TCP."""
        if role not in ROLE_NAMES:
            raise UnknownRoleError(role)
        superuser = conninfo_to_dict(self.superuser_dsn)
        password = login_password(str(superuser.get("password", "")), role)
        return make_conninfo(
            self.superuser_dsn, user=login_user_name(role), password=password, **params
        )


def _execute_admin(cluster: PrivateServer, command: sql.Composed) -> None:
    with cluster.connect() as conn:
        conn.execute(command)


def _create_database(cluster: PrivateServer, name: str, template: str | None) -> None:
    if template is None:
        command = sql.SQL(statement("database_create")).format(name=sql.Identifier(name))
    else:
        command = sql.SQL(statement("database_create_from_template")).format(
            name=sql.Identifier(name), template=sql.Identifier(template)
        )
    deadline = time.monotonic() + _CLONE_TIMEOUT_S
    while True:
        try:
            _execute_admin(cluster, command)
        except pg_errors.ObjectInUse:
            # "source database is being accessed by other users": a session still closing.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        else:
            return


def prepare_ql3_database(
    cluster: PrivateServer,
    name: str,
    *,
    template: str | None = None,
    as_template: bool = False,
) -> Ql3Database:
    """Create database `name` ready for QL3 and return it.

    Provisions the group roles and the database ACL, (re)creates the four login users, runs
    the migrations as the owner's login user and records this node's zone rules version. With
    `template`, the database is cloned from that (already prepared) database, which must have no
    open sessions; migrations and the record are then no-ops.
    `as_template=True` marks the new database as a template that refuses connections, so it
    can be cloned at any time.

    Raises:
        DatabaseError: any step failed (the message says which).

    """
    try:
        _create_database(cluster, name, template)
    except psycopg.Error as exc:
        raise DatabaseError(f"create database {name!r}: {exc}") from exc
    database = Ql3Database(name=name, superuser_dsn=cluster.dsn(name))
    provision_roles(database.superuser_dsn)
    for role in ROLE_NAMES:
        create_login_user(
            database.superuser_dsn,
            login_user_name(role),
            login_password(cluster.superuser_password, role),
            role,
        )
    migrate(database.dsn("owner"))
    # As `ql3 migrate` does: replicas claim only with the zone rules recorded here (DESIGN §9).
    record_zone_rules(database.dsn("owner"))
    if as_template:
        mark = sql.SQL(statement("database_mark_template")).format(name=sql.Identifier(name))
        try:
            _execute_admin(cluster, mark)
        except psycopg.Error as exc:
            raise DatabaseError(f"mark {name!r} as template: {exc}") from exc
    return database


def drop_database(cluster: PrivateServer, name: str) -> None:
    """Drop database `name` if it exists, terminating its sessions (WITH (FORCE)).

    A database marked by `prepare_ql3_database(as_template=True)` is unmarked first.

    Raises:
        DatabaseError: the drop failed.

    """
    ident = sql.Identifier(name)
    try:
        with cluster.connect() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            found = cursor.execute(statement("database_is_template"), {"name": name}).fetchone()
            if found is not None and found["datistemplate"]:
                conn.execute(sql.SQL(statement("database_unmark_template")).format(name=ident))
            conn.execute(sql.SQL(statement("database_drop")).format(name=ident))
    except psycopg.Error as exc:
        raise DatabaseError(f"drop database {name!r}: {exc}") from exc
