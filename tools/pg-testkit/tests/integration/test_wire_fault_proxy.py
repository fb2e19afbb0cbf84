"""WireFaultProxy against real PostgreSQL: lost COMMIT replies are deterministic, faults heal."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from ql3_testkit import ThrowawayCluster, WireFaultProxy, drop_database

if TYPE_CHECKING:
    from collections.abc import Iterator

TRIES = 100


@dataclass(frozen=True)
class Target:
    """The database behind the proxy: where it listens and how to reach it directly."""

    host: str
    port: int
    direct_dsn: str


@pytest.fixture(scope="module")
def cluster(pg_cluster: ThrowawayCluster) -> Iterator[Target]:
    """Give this module its own database with a small table on the shared server."""
    name = f"faults_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with psycopg.connect(pg_cluster.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE TABLE marks (id int PRIMARY KEY)")
        yield Target(pg_cluster.host, pg_cluster.port, pg_cluster.dsn(name))
    finally:
        drop_database(pg_cluster, name)


@pytest.fixture
def proxy(cluster: Target) -> Iterator[WireFaultProxy]:
    """Start a proxy in front of the cluster; stop it after the test."""
    with WireFaultProxy(cluster.host, cluster.port) as started:
        yield started


def _via(cluster: Target, proxy: WireFaultProxy) -> str:
    return make_conninfo(cluster.direct_dsn, host="127.0.0.1", port=str(proxy.port))


def _count(cluster: Target, low: int, high: int) -> int:
    with psycopg.connect(cluster.direct_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM marks WHERE id >= %s AND id < %s", (low, high)
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_dropped_commit_reply_is_deterministic(cluster: Target, proxy: WireFaultProxy) -> None:
    """Armed 100 times, every COMMIT commits on the server and every client sees a lost reply."""
    failures = 0
    for index in range(TRIES):
        conn = psycopg.connect(_via(cluster, proxy))
        try:
            conn.execute("INSERT INTO marks (id) VALUES (%s)", (1000 + index,))
            proxy.drop_next_commit_reply()
            with pytest.raises(psycopg.OperationalError) as caught:
                conn.commit()
            assert caught.value.sqlstate is None
            failures += 1
        finally:
            conn.close()
    assert failures == TRIES
    assert proxy.commit_replies_dropped == TRIES
    assert _count(cluster, 1000, 1000 + TRIES) == TRIES


def test_unarmed_proxy_forwards_commits(cluster: Target, proxy: WireFaultProxy) -> None:
    """Without arming, commits through the proxy succeed and nothing is dropped."""
    with psycopg.connect(_via(cluster, proxy)) as conn:
        conn.execute("INSERT INTO marks (id) VALUES (2000)")
        conn.commit()
        conn.execute("INSERT INTO marks (id) VALUES (2001)")
        conn.commit()
    assert proxy.commit_replies_dropped == 0
    assert _count(cluster, 2000, 2002) == 2


def test_only_the_commit_reply_is_dropped(cluster: Target, proxy: WireFaultProxy) -> None:
    """Arming does not disturb other statements: the drop waits for the COMMIT."""
    conn = psycopg.connect(_via(cluster, proxy))
    try:
        proxy.drop_next_commit_reply()
        for index in range(5):
            conn.execute("INSERT INTO marks (id) VALUES (%s)", (3000 + index,))
        assert proxy.commit_replies_dropped == 0
        with pytest.raises(psycopg.OperationalError):
            conn.commit()
    finally:
        conn.close()
    assert proxy.commit_replies_dropped == 1
    assert _count(cluster, 3000, 3005) == 5


def test_extended_protocol_commit_is_recognised(cluster: Target, proxy: WireFaultProxy) -> None:
    """A COMMIT sent through Parse/Bind/Execute (pipeline mode) is dropped the same way."""
    conn = psycopg.connect(_via(cluster, proxy))
    try:
        # The lost reply surfaces at commit or at the pipeline's exit, so both are inside.
        with pytest.raises(psycopg.OperationalError), conn.pipeline():  # noqa: PT012
            conn.execute("INSERT INTO marks (id) VALUES (4000)")
            proxy.drop_next_commit_reply()
            conn.commit()
    finally:
        conn.close()
    assert proxy.commit_replies_dropped == 1
    assert _count(cluster, 4000, 4001) == 1


def test_an_autocommit_write_named_by_its_text_loses_its_reply(
    cluster: Target, proxy: WireFaultProxy
) -> None:
    """Outside a transaction block the write commits, and only the statement named loses its reply.

    Planted control: the unmarked statements before it, on the same connection, are answered.
    """
    conn = psycopg.connect(_via(cluster, proxy), autocommit=True)
    try:
        proxy.drop_next_reply_to("-- lossy")
        conn.execute("INSERT INTO marks (id) VALUES (%s)", (5000,))
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert proxy.commit_replies_dropped == 0
        with pytest.raises(psycopg.OperationalError) as caught:
            conn.execute("-- lossy\nINSERT INTO marks (id) VALUES (%s)", (5001,))
        assert caught.value.sqlstate is None
    finally:
        conn.close()
    assert proxy.commit_replies_dropped == 1
    assert _count(cluster, 5000, 5002) == 2


def test_a_prepared_statement_is_recognised_when_only_bound(
    cluster: Target, proxy: WireFaultProxy
) -> None:
    """A statement parsed once and then only bound (psycopg's prepared statements) is found."""
    statement = "-- lossy prepared\nINSERT INTO marks (id) VALUES (%s)"
    conn = psycopg.connect(_via(cluster, proxy), autocommit=True)
    try:
        conn.execute(statement, (6000,), prepare=True)
        proxy.drop_next_reply_to("-- lossy prepared")
        with pytest.raises(psycopg.OperationalError):
            conn.execute(statement, (6001,), prepare=True)
    finally:
        conn.close()
    assert proxy.commit_replies_dropped == 1
    assert _count(cluster, 6000, 6002) == 2


def test_tls_is_refused_so_the_protocol_stays_readable(
    cluster: Target, proxy: WireFaultProxy
) -> None:
    """sslmode=prefer falls back to clear text; sslmode=require fails clearly."""
    with psycopg.connect(_via(cluster, proxy) + " sslmode=prefer") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(_via(cluster, proxy) + " sslmode=require")


def test_reset_connections_breaks_open_sessions(cluster: Target, proxy: WireFaultProxy) -> None:
    """After a reset the open session fails; a new connection works."""
    conn = psycopg.connect(_via(cluster, proxy), autocommit=True)
    try:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        proxy.reset_connections()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    with psycopg.connect(_via(cluster, proxy), autocommit=True) as fresh:
        assert fresh.execute("SELECT 2").fetchone() == (2,)


def test_partition_holds_traffic_until_heal(cluster: Target, proxy: WireFaultProxy) -> None:
    """A query sent during a partition gets no answer until the heal, then completes."""
    conn = psycopg.connect(_via(cluster, proxy), autocommit=True)
    answered = threading.Event()
    result: list[object] = []

    def ask() -> None:
        result.append(conn.execute("SELECT 42").fetchone())
        answered.set()

    try:
        proxy.partition()
        worker = threading.Thread(target=ask, daemon=True)
        worker.start()
        assert not answered.wait(0.5)
        proxy.heal()
        assert answered.wait(10)
        worker.join(10)
        assert result == [(42,)]
    finally:
        proxy.heal()
        conn.close()


def test_delay_holds_each_message(cluster: Target, proxy: WireFaultProxy) -> None:
    """With a delay set, a round trip takes at least that delay; cleared, traffic flows again."""
    with psycopg.connect(_via(cluster, proxy), autocommit=True) as conn:
        proxy.set_delay_ms(200)
        started = time.monotonic()
        conn.execute("SELECT 1")
        assert time.monotonic() - started >= 0.2
        proxy.set_delay_ms(0)
        assert conn.execute("SELECT 3").fetchone() == (3,)
    with pytest.raises(ValueError, match="delay"):
        proxy.set_delay_ms(-1)


def test_stop_is_idempotent_and_closes_clients(cluster: Target) -> None:
    """Stopping the proxy resets its clients, and stopping twice is harmless."""
    proxy = WireFaultProxy(cluster.host, cluster.port).start()
    conn = psycopg.connect(_via(cluster, proxy), autocommit=True)
    try:
        assert proxy.connections == 1
        proxy.stop()
        proxy.stop()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()


def test_set_upstream_moves_new_connections(cluster: Target, proxy: WireFaultProxy) -> None:
    """After set_upstream new connections reach the new server; a dead one refuses clients."""
    assert proxy.upstream == (cluster.host, cluster.port)
    proxy.set_upstream("127.0.0.1", 1)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(_via(cluster, proxy), connect_timeout=3)
    proxy.set_upstream(cluster.host, cluster.port)
    with psycopg.connect(_via(cluster, proxy), autocommit=True) as conn:
        assert conn.execute("SELECT 5").fetchone() == (5,)
