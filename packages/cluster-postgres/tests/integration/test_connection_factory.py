"""Every connection the package opens is made by its one factory: keepalives, timeouts, a name.

Checked on the live connections themselves: the TCP options of the client socket as the kernel
holds them (SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT) and the
session as the server sees it (`pg_stat_activity.application_name`, `SHOW`). Components that
keep a connection are inspected through it; the one-shot functions (migrate, provisioning, zone
rules, verify) are caught while they wait on a lock this test holds, their socket found in this
process by the client port the server reports.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from ql3_cluster_postgres import (
    ConnectionSettings,
    HistoryReader,
    PostgresScheduleRepository,
    ScheduleAdmin,
    WorkerIngress,
    migrate,
    provision_roles,
    read_zone_rules,
    verify_history,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database, ThrowawayCluster

_DEFAULTS = ConnectionSettings()
# What the kernel holds for a socket libpq opened with the default ConnectionSettings.
_EXPECTED_SOCKET = {
    "keepalive": 1,
    "idle_s": _DEFAULTS.keepalives_idle_s,
    "interval_s": _DEFAULTS.keepalives_interval_s,
    "count": _DEFAULTS.keepalives_count,
    "user_timeout_ms": _DEFAULTS.tcp_user_timeout_ms,
}
_TIMEOUT_S = 20.0


def _socket_options(fd: int) -> dict[str, int]:
    """Read the keepalive and user-timeout options of the TCP socket `fd` (a duplicate is read)."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        return {
            "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle_s": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "interval_s": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "user_timeout_ms": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }


def _connection_options(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return _socket_options(conn.pgconn.socket)


def _fd_of_local_port(port: int) -> int:
    """Find this process's TCP socket whose local port is `port` (a libpq client socket)."""
    for entry in Path("/proc/self/fd").iterdir():
        fd = int(entry.name)
        try:
            if not str(entry.readlink()).startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(fd)) as sock:
                internet = sock.family in {socket.AF_INET, socket.AF_INET6}
                if internet and sock.getsockname()[1] == port:
                    return fd
        except OSError:
            continue  # closed meanwhile, or not an internet socket
    msg = f"no socket with local port {port} in this process"
    raise AssertionError(msg)


def _waiting_client_port(superuser: psycopg.Connection[Any], application_name: str) -> int | None:
    """Return the client port of the session named `application_name` once it waits on a lock."""
    rows = superuser.execute(
        "SELECT client_port AS port FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = %s AND wait_event_type = 'Lock'",
        (application_name,),
    ).fetchall()
    return next((int(port) for (port,) in rows), None)


def _caught_waiting(
    db: Ql3Database, lock_sql: str, application_name: str, run: Callable[[], object]
) -> dict[str, int]:
    """Read the socket options of `run`'s connection while it waits on `lock_sql`, held here.

    The lock is taken in a transaction, `run` starts in a thread; once the server shows its
    session waiting, its client socket is read, the lock released and `run` let finish (its
    errors are raised here).
    """
    failures: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            failures.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    with (
        psycopg.connect(db.superuser_dsn) as holder,
        psycopg.connect(db.superuser_dsn, autocommit=True) as watcher,
    ):
        holder.execute(lock_sql)
        worker.start()
        deadline = time.monotonic() + _TIMEOUT_S
        while (port := _waiting_client_port(watcher, application_name)) is None:
            assert time.monotonic() < deadline, f"{application_name} never waited on the lock"
            time.sleep(0.02)
        options = _socket_options(_fd_of_local_port(port))
        holder.rollback()
        holder.close()  # a session-level advisory lock ends with the session
    worker.join(_TIMEOUT_S)
    assert not worker.is_alive()
    if failures:
        raise failures[0]
    return options


def _package_sql(folder: str, name: str) -> str:
    """Read one of the package's own statements, as shipped, to take the lock it takes."""
    path = resources.files("ql3_cluster_postgres").joinpath(folder, f"{name}.sql")
    return path.read_text(encoding="utf-8")


def test_repository_connections_carry_keepalives_and_session_limits(ql3_db: Ql3Database) -> None:
    """The repository's working and LISTEN connections carry keepalives, timeouts and limits."""
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        repo.database_now_ms()
        assert not repo.wait_for_wakeup(0)
        working, listening = repo._conn, repo._listen_conn
        assert working is not None
        assert listening is not None
        for conn in (working, listening):
            assert _connection_options(conn) == _EXPECTED_SOCKET
            assert conn.info.get_parameters()["connect_timeout"] == "5"
        limits = working.execute(
            "SELECT current_setting('lock_timeout'),"
            " current_setting('idle_in_transaction_session_timeout'),"
            " current_setting('application_name')"
        ).fetchone()
    assert limits == ("5s", "10s", "ql3")


def test_admin_connection_carries_keepalives(ql3_db: Ql3Database) -> None:
    """ScheduleAdmin's connection, used inside its own transaction, carries the keepalives."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        options = admin._in_transaction("probe", _connection_options)
        conn = admin._conn
        assert conn is not None
        name = conn.execute("SELECT current_setting('application_name')").fetchone()
    assert options == _EXPECTED_SOCKET
    assert name == ("ql3-admin",)


def test_ingress_pool_connections_carry_keepalives(ql3_db: Ql3Database) -> None:
    """Connections handed out by WorkerIngress's pool are made by the factory too."""
    with (
        WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress,
        ingress._connection("probe") as conn,
    ):
        assert _connection_options(conn) == _EXPECTED_SOCKET
        assert conn.info.get_parameters()["connect_timeout"] == "5"
        name = conn.execute("SELECT current_setting('application_name')").fetchone()
    assert name == ("ql3-worker",)


def test_history_reader_connection_carries_keepalives(ql3_db: Ql3Database) -> None:
    """HistoryReader's read-only session carries the keepalives."""
    with HistoryReader(ql3_db.dsn("admin")) as reader:
        reader.database_now_ms()
        conn = reader._conn
        assert conn is not None
        assert _connection_options(conn) == _EXPECTED_SOCKET
        session = conn.execute(
            "SELECT current_setting('application_name'),"
            " current_setting('default_transaction_read_only')"
        ).fetchone()
    assert session == ("ql3-history", "on")


def test_private_server_connection_carries_keepalives(pg_cluster: ThrowawayCluster) -> None:
    """The private server's set-up connection is made by the factory as well."""
    with pg_cluster.connect() as conn:
        assert _connection_options(conn) == _EXPECTED_SOCKET
        name = conn.execute("SELECT current_setting('application_name')").fetchone()
    assert name == ("ql3-private-server",)


# The package's own lock statements, and table locks where a plain read must be made to wait.
_LOCK_ZONE_RULES = "LOCK TABLE ql3.zone_rules IN ACCESS EXCLUSIVE MODE"
_LOCK_SCHEDULES = "LOCK TABLE ql3.trigger_schedules IN ACCESS EXCLUSIVE MODE"


@pytest.mark.parametrize(
    ("application_name", "lock", "run"),
    [
        pytest.param(
            "ql3-migrate",
            lambda: _package_sql("provisioning", "migrations_lock"),
            lambda db: migrate(db.dsn("owner")),
            id="migrate",
        ),
        pytest.param(
            "ql3-roles",
            lambda: _package_sql("provisioning", "roles_lock"),
            lambda db: provision_roles(db.superuser_dsn),
            id="provision_roles",
        ),
        pytest.param(
            "ql3-zone-rules",
            lambda: _LOCK_ZONE_RULES,
            lambda db: read_zone_rules(db.dsn("admin")),
            id="zone_rules",
        ),
        pytest.param(
            "ql3-verify",
            lambda: _LOCK_SCHEDULES,
            lambda db: verify_history(db.dsn("admin")),
            id="verify",
        ),
    ],
)
def test_one_shot_connections_carry_keepalives(
    ql3_db: Ql3Database,
    application_name: str,
    lock: Callable[[], str],
    run: Callable[[Ql3Database], object],
) -> None:
    """Migrate, provisioning, zone rules and verify open their connection through the factory."""
    options = _caught_waiting(ql3_db, lock(), application_name, lambda: run(ql3_db))
    assert options == _EXPECTED_SOCKET
