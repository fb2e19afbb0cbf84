"""Role provisioning (DESIGN §11): NOLOGIN groups, ownership, nothing for PUBLIC, login users."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql
from ql3_cluster_postgres import (
    GROUP_ROLES,
    DatabaseError,
    UnknownRoleError,
    create_login_user,
    migrate,
    provision_roles,
    provision_roles_if_missing,
)
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database, login_user_name

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_PASSWORD = uuid.uuid4().hex
TABLES = ("tasks", "triggers", "trigger_schedules", "runs", "attempts", "events")


def _rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, params or None).fetchall()


def test_group_roles_cannot_log_in(ql3_db: Ql3Database) -> None:
    """The five group roles exist, are NOLOGIN and hold no special attribute."""
    rows = _rows(
        ql3_db.superuser_dsn,
        "SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls"
        " FROM pg_roles WHERE rolname = ANY(%s) ORDER BY rolname",
        list(GROUP_ROLES),
    )
    assert rows == [(name, False, False, False, False, False) for name in sorted(GROUP_ROLES)]


def test_schema_and_tables_belong_to_the_owner(ql3_db: Ql3Database) -> None:
    """Schema ql3 and every table in it are owned by ql3_owner, not by a login user."""
    schema = _rows(
        ql3_db.superuser_dsn,
        "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'ql3'",
    )
    owners = _rows(
        ql3_db.superuser_dsn,
        "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'ql3'",
    )
    assert schema == [("ql3_owner",)]
    assert owners == [("ql3_owner",)]


def test_public_has_nothing(ql3_db: Ql3Database) -> None:
    """PUBLIC may not connect, use schema ql3, touch any table, nor create in schema public."""
    checks = [
        ("has_database_privilege('public', current_database(), 'CONNECT')",),
        ("has_database_privilege('public', current_database(), 'TEMPORARY')",),
        ("has_schema_privilege('public', 'ql3', 'USAGE')",),
        ("has_schema_privilege('public', 'public', 'CREATE')",),
    ]
    checks += [
        (f"has_table_privilege('public', 'ql3.{table}', '{privilege}')",)
        for table in (*TABLES, "schema_migrations")
        for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES")
    ]
    with psycopg.connect(ql3_db.superuser_dsn) as conn:
        for (expression,) in checks:
            row = conn.execute(f"SELECT {expression}").fetchone()
            assert row == (False,), expression


def test_login_user_in_no_group_cannot_connect(
    pg_cluster: ThrowawayCluster, ql3_db: Ql3Database
) -> None:
    """A login user in no QL3 group is refused at connect time by the database ACL."""
    name = f"ql3_stranger_{uuid.uuid4().hex[:6]}"
    password = uuid.uuid4().hex
    create_login_user(ql3_db.superuser_dsn, name, password, None)
    dsn = pg_cluster.dsn(ql3_db.name, user=name, password=password)
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(dsn, connect_timeout=5)


def test_create_login_user_is_idempotent_and_rotates_the_password(
    pg_cluster: ThrowawayCluster, ql3_db: Ql3Database
) -> None:
    """Re-running create_login_user sets the new password; the old one stops working."""
    name = f"ql3_rot_{uuid.uuid4().hex[:6]}"
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    create_login_user(ql3_db.superuser_dsn, name, first, "runtime")
    create_login_user(ql3_db.superuser_dsn, name, second, "ql3_runtime")
    with psycopg.connect(pg_cluster.dsn(ql3_db.name, user=name, password=second)) as conn:
        row = conn.execute("SELECT count(*) FROM ql3.trigger_schedules").fetchone()
        assert row == (0,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_cluster.dsn(ql3_db.name, user=name, password=first))


def test_unknown_group_is_refused(ql3_db: Ql3Database) -> None:
    """A group that is not a QL3 role is a ValueError naming it, and nothing is created."""
    with pytest.raises(UnknownRoleError, match="'superuser'") as caught:
        create_login_user(ql3_db.superuser_dsn, "ql3_never", "pw", "superuser")
    assert isinstance(caught.value, ValueError)
    with pytest.raises(UnknownRoleError, match="'root'"):
        ql3_db.dsn("root")
    rows = _rows(ql3_db.superuser_dsn, "SELECT 1 FROM pg_roles WHERE rolname = 'ql3_never'")
    assert rows == []


def test_provision_roles_twice_changes_nothing(ql3_db: Ql3Database) -> None:
    """provision_roles is idempotent: a second run keeps roles, ownership and grants."""
    query = (
        "SELECT c.relname, c.relacl::text FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ql3' ORDER BY 1"
    )
    before = _rows(ql3_db.superuser_dsn, query)
    provision_roles(ql3_db.superuser_dsn)
    provision_roles(ql3_db.superuser_dsn)
    assert _rows(ql3_db.superuser_dsn, query) == before


def test_provision_roles_needs_a_superuser(ql3_db: Ql3Database) -> None:
    """A non-superuser cannot provision; the psycopg error is wrapped in DatabaseError."""
    with pytest.raises(DatabaseError, match="provision_roles") as caught:
        provision_roles(ql3_db.dsn("admin"))
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_migrate_refuses_a_user_outside_the_owner_group(ql3_db: Ql3Database) -> None:
    """Only a member of ql3_owner may migrate, so objects never belong to a working role."""
    with pytest.raises(DatabaseError, match="ql3_owner"):
        migrate(ql3_db.dsn("runtime"))


_PROVISION_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, time
    from ql3_cluster_postgres import provision_roles
    go = pathlib.Path(sys.argv[2])
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    provision_roles(sys.argv[1])
    """
)


def test_concurrent_provisioning_from_two_processes(tmp_path: Path) -> None:
    """Two processes provisioning two databases of a fresh cluster at once both succeed."""
    with ThrowawayCluster(name="provrace") as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            for name in ("race_a", "race_b"):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        go = tmp_path / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _PROVISION_SCRIPT, cluster.dsn(name), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("race_a", "race_b")
        ]
        go.touch()
        results = [proc.communicate(timeout=120) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], results
        for name in ("race_a", "race_b"):
            owner = _rows(
                cluster.dsn(name),
                "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'ql3'",
            )
            assert owner == [("ql3_owner",)]
        groups = _rows(cluster.dsn(), "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'ql3\\_%%'")
        assert groups == [(len(GROUP_ROLES),)]


@pytest.fixture
def unprovisioned_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a new database of the session cluster without schema ql3 (the groups exist)."""
    assert ql3_template  # the template created the cluster-wide groups and login users
    name = f"ql3_raw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield Ql3Database(name=name, superuser_dsn=pg_cluster.dsn(name))
    drop_database(pg_cluster, name)


def _schema_exists(dsn: str) -> bool:
    return bool(_rows(dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'ql3'")[0][0])


def test_provision_roles_says_what_it_did(unprovisioned_db: Ql3Database) -> None:
    """Provisioning returns a line per role, for the schema and per grant; a rerun finds them."""
    first = provision_roles(unprovisioned_db.superuser_dsn)
    found = "already exists (NOLOGIN group, attributes checked)"
    connect = f"granted CONNECT on database {unprovisioned_db.name} to the five QL3 groups"
    assert first == [
        *(f"role {name} {found}" for name in GROUP_ROLES),
        "created schema ql3, owned by ql3_owner",
        (
            "granted USAGE on schema ql3 to ql3_admin, ql3_runtime, ql3_worker_ingress,"
            " ql3_observer (not PUBLIC)"
        ),
        f"{connect}; revoked it from PUBLIC",
    ]
    again = provision_roles(unprovisioned_db.superuser_dsn)
    assert again[len(GROUP_ROLES)] == "schema ql3 already exists, owned by ql3_owner"


def test_migrate_on_an_unprovisioned_database_names_the_real_verb(
    unprovisioned_db: Ql3Database,
) -> None:
    """Migrate without the schema says to run `ql3 roles provision` (a verb that exists)."""
    with pytest.raises(DatabaseError) as caught:
        migrate(unprovisioned_db.dsn("owner"))
    message = str(caught.value)
    assert "run `ql3 roles provision` as a superuser first" in message
    assert "provision-roles" not in message
    assert "provision_roles (" not in message
    assert not _schema_exists(unprovisioned_db.superuser_dsn)


def test_migrate_by_a_login_outside_ql3_owner_says_how_to_grant_it(ql3_db: Ql3Database) -> None:
    """On a provisioned database, a login that is not in ql3_owner is told the GRANT it needs."""
    user = login_user_name("runtime")
    with pytest.raises(DatabaseError, match=f"GRANT ql3_owner TO {user}"):
        migrate(ql3_db.dsn("runtime"))


def test_provision_if_missing_leaves_a_provisioned_database_alone(ql3_db: Ql3Database) -> None:
    """On a provisioned database nothing is done, for a superuser and a plain login alike."""
    assert provision_roles_if_missing(ql3_db.superuser_dsn) == []
    assert provision_roles_if_missing(ql3_db.dsn("owner")) == []


def test_provision_if_missing_provisions_a_new_database_for_a_superuser(
    unprovisioned_db: Ql3Database,
) -> None:
    """A superuser gets the schema created and the steps reported; a second call does nothing."""
    steps = provision_roles_if_missing(unprovisioned_db.superuser_dsn)
    assert "created schema ql3, owned by ql3_owner" in steps
    assert _schema_exists(unprovisioned_db.superuser_dsn)
    assert provision_roles_if_missing(unprovisioned_db.superuser_dsn) == []
    assert migrate(unprovisioned_db.dsn("owner"))


def test_provision_if_missing_refuses_a_login_that_is_not_a_superuser(
    unprovisioned_db: Ql3Database,
) -> None:
    """A plain login on an unprovisioned database is refused naming the verb; nothing written."""
    with pytest.raises(DatabaseError, match="run `ql3 roles provision` as a superuser first"):
        provision_roles_if_missing(unprovisioned_db.dsn("owner"))
    assert not _schema_exists(unprovisioned_db.superuser_dsn)


def test_provision_if_missing_creates_the_groups_on_a_fresh_cluster() -> None:
    """On a cluster without QL3 roles a superuser creates all four; CREATEROLE is not enough."""
    with ThrowawayCluster(name="provfresh") as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE fresh")
            for statement in (
                "CREATE ROLE plain LOGIN PASSWORD {}",
                "CREATE ROLE creator LOGIN CREATEROLE PASSWORD {}",
            ):
                conn.execute(sql.SQL(statement).format(sql.Literal(_PASSWORD)))
        for user in ("plain", "creator"):
            dsn = cluster.dsn("fresh", user=user, password=_PASSWORD)
            with pytest.raises(DatabaseError, match=f"user {user!r} may not create them"):
                provision_roles_if_missing(dsn)
        groups = "SELECT rolname FROM pg_roles WHERE rolname LIKE 'ql3\\_%%' ORDER BY 1"
        assert _rows(cluster.dsn(), groups) == []
        steps = provision_roles_if_missing(cluster.dsn("fresh"))
        assert steps[: len(GROUP_ROLES)] == [
            f"created role {name} (NOLOGIN group)" for name in GROUP_ROLES
        ]
        assert [row[0] for row in _rows(cluster.dsn(), groups)] == sorted(GROUP_ROLES)
        assert provision_roles_if_missing(cluster.dsn("fresh")) == []


def test_a_login_password_never_reaches_the_server_in_clear(
    pg_cluster: ThrowawayCluster, ql3_db: Ql3Database
) -> None:
    """create_login_user sends a SCRAM verifier: even a log of every statement never holds it.

    The database logs every statement of new sessions; the password is absent from the
    server log, the stored secret is a SCRAM-SHA-256 verifier, and the password still logs in.
    """
    name = f"ql3_quiet_{uuid.uuid4().hex[:6]}"
    password = f"pw-{uuid.uuid4().hex}"
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET log_statement = 'all'").format(
                sql.Identifier(ql3_db.name)
            )
        )
    try:
        create_login_user(ql3_db.superuser_dsn, name, password, "runtime")
    finally:
        with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} RESET log_statement").format(sql.Identifier(ql3_db.name))
            )
    log = pg_cluster.log_path.read_text(encoding="utf-8", errors="replace")
    assert f"CREATE ROLE {name}" in log.replace('"', "")  # the statement was logged ...
    assert password not in log  # ... without the password
    (stored,) = _rows(
        ql3_db.superuser_dsn, "SELECT rolpassword FROM pg_authid WHERE rolname = %s", name
    )
    assert stored[0].startswith("SCRAM-SHA-256$")
    with psycopg.connect(pg_cluster.dsn(ql3_db.name, user=name, password=password)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (name,)
