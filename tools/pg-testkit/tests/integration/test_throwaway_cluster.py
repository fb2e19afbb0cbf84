"""ThrowawayCluster against real PostgreSQL: test settings, live clock offsets, crash, standbys."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ql3_cluster_postgres import PrivateServer, PrivateServerError, find_postgres_bin_dir
from ql3_testkit import Ql3Database, ThrowawayCluster, ThrowawayClusterError

NOW_MS = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
HOUR_MS = 3_600_000


def _now_ms(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(NOW_MS).fetchone()
    assert row is not None
    return int(row[0])


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_non_durable_settings(pg_cluster: ThrowawayCluster) -> None:
    """The session cluster runs with fsync, full_page_writes and synchronous_commit off."""
    with psycopg.connect(pg_cluster.dsn()) as conn:
        for name in ("fsync", "full_page_writes", "synchronous_commit"):
            row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
            assert row == ("off",), name


def test_clock_offset_moves_open_connections_forward_and_back(
    faketime_cluster: ThrowawayCluster, faketime_db: Ql3Database
) -> None:
    """An open connection sees the database clock step +1 h and then back to -30 s at once."""
    with psycopg.connect(faketime_db.dsn("runtime")) as conn:
        start_mono = time.monotonic()
        before = _now_ms(conn)
        faketime_cluster.set_clock_offset_ms(HOUR_MS)
        forward = _now_ms(conn)
        faketime_cluster.set_clock_offset_ms(-30_000)
        back = _now_ms(conn)
        elapsed_ms = (time.monotonic() - start_mono) * 1000
    # Each step equals the offset change up to the real time that passed between the reads.
    assert HOUR_MS <= forward - before <= HOUR_MS + elapsed_ms + 5
    assert -(HOUR_MS + 30_000) - 5 <= back - forward <= -(HOUR_MS + 30_000) + elapsed_ms + 5


def test_faked_clock_differs_from_a_plain_cluster_by_the_offset(
    faketime_cluster: ThrowawayCluster, faketime_db: Ql3Database, pg_cluster: ThrowawayCluster
) -> None:
    """Against a plain cluster's clock, the faked clock is ahead by a fractional offset."""
    faketime_cluster.set_clock_offset_ms(1_500)
    with (
        psycopg.connect(faketime_db.dsn("admin")) as fake,
        psycopg.connect(pg_cluster.dsn()) as plain,
    ):
        plain_before = _now_ms(plain)
        faked = _now_ms(fake)
        plain_after = _now_ms(plain)
        settings = fake.execute("SELECT current_setting('max_parallel_workers_per_gather')")
        assert settings.fetchone() == ("0",)
    assert plain_before + 1_500 - 5 <= faked <= plain_after + 1_500 + 5


def test_offset_needs_a_faketime_cluster(pg_cluster: ThrowawayCluster) -> None:
    """set_clock_offset_ms on a cluster started without faketime is an error, not a no-op."""
    with pytest.raises(ThrowawayClusterError, match="faketime=True"):
        pg_cluster.set_clock_offset_ms(1_000)


def test_kill_and_restart_keep_data_and_port() -> None:
    """kill() crashes the server; restart() recovers it on the same port with committed data."""
    with ThrowawayCluster(name="crash", durable=True) as cluster:
        port = cluster.port
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (7)")
        pid = cluster.pid
        cluster.kill()
        assert not _pid_alive(pid)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(cluster.dsn(), connect_timeout=2)
        cluster.restart()
        assert cluster.port == port
        with psycopg.connect(cluster.dsn()) as conn:
            assert conn.execute("SELECT x FROM t").fetchall() == [(7,)]


def test_standby_promotion_moves_to_timeline_two() -> None:
    """A streaming standby replays a row, the fenced primary stays down, promotion -> timeline 2."""
    with ThrowawayCluster(name="failover") as primary:
        standby = primary.create_standby(synchronous=True)
        assert standby.in_recovery()
        assert primary.timeline() == 1
        with psycopg.connect(primary.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (42)")  # synchronous: on the standby at commit
        with psycopg.connect(standby.dsn()) as conn:
            assert conn.execute("SELECT x FROM t").fetchall() == [(42,)]
        primary.fence()
        standby.promote()
        assert not standby.in_recovery()
        assert standby.timeline() == 2
        with psycopg.connect(standby.dsn(), autocommit=True) as conn:
            conn.execute("INSERT INTO t VALUES (43)")
            assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(42,), (43,)]
        standby_base = standby.base_dir
    assert not standby_base.exists()


def test_asynchronous_standby_streams() -> None:
    """create_standby() without synchronous waits until the standby streams from the primary."""
    with ThrowawayCluster(name="async") as primary:
        standby = primary.create_standby()
        with psycopg.connect(primary.dsn()) as conn:
            row = conn.execute(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
                (standby.name,),
            ).fetchone()
        assert row == ("streaming", "async")


def test_fenced_primary_refuses_to_start() -> None:
    """After fence() the old primary's data dir cannot be started, neither by us nor by pg_ctl."""
    with ThrowawayCluster(name="fence") as cluster:
        cluster.fence()
        assert cluster.fenced
        assert not cluster.running
        with pytest.raises(PrivateServerError, match="configuration file"):
            cluster.restart()
        pg_ctl = find_postgres_bin_dir() / "pg_ctl"
        user = "postgres" if os.geteuid() == 0 else None
        result = subprocess.run(
            [str(pg_ctl), "start", "-w", "-t", "10", "-D", str(cluster.data_dir)],
            capture_output=True,
            text=True,
            check=False,
            user=user,
            cwd=cluster.base_dir,
        )
        assert result.returncode != 0
        assert not cluster.running


def test_missing_libfaketime_names_the_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without libfaketime a faketime cluster fails at once, saying which packages to install."""
    monkeypatch.setenv("LIBFAKETIME_PATH", str(tmp_path / "missing" / "libfaketime.so.1"))
    cluster = ThrowawayCluster(faketime=True, name="nofaketime")
    with pytest.raises(ThrowawayClusterError, match="apt-get install faketime libfaketime"):
        cluster.start()
    assert list(tmp_path.iterdir()) == []


def test_faketime_standby_has_its_own_clock() -> None:
    """A faketime primary's standby starts at the primary's offset and then moves on its own."""
    with ThrowawayCluster(name="fakefailover", faketime=True) as primary:
        primary.set_clock_offset_ms(HOUR_MS)
        standby = primary.create_standby()
        assert standby.clock_offset_ms == HOUR_MS
        with (
            psycopg.connect(primary.dsn()) as on_primary,
            psycopg.connect(standby.dsn()) as on_standby,
        ):
            start = time.monotonic()
            skew_before = _now_ms(on_standby) - _now_ms(on_primary)
            standby.set_clock_offset_ms(-HOUR_MS)
            skew_after = _now_ms(on_standby) - _now_ms(on_primary)
            elapsed_ms = (time.monotonic() - start) * 1000
        assert abs(skew_before) <= elapsed_ms + 5
        assert abs(skew_after + 2 * HOUR_MS) <= elapsed_ms + 5


def test_a_cluster_is_a_private_server_with_test_settings(pg_cluster: ThrowawayCluster) -> None:
    """The kit's cluster is the product's PrivateServer, started with replication and checksums."""
    assert isinstance(pg_cluster, PrivateServer)
    with psycopg.connect(pg_cluster.dsn()) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("replica",)
        assert conn.execute("SHOW data_checksums").fetchone() == ("on",)


def test_restart_keeps_the_port_after_a_graceful_halt() -> None:
    """restart() of a running cluster stops it, waits for its backends and starts on its port."""
    with ThrowawayCluster(name="restart") as cluster:
        port, pid = cluster.port, cluster.pid
        cluster.restart()
        assert cluster.port == port
        assert cluster.pid != pid
        assert not _pid_alive(pid)
        with psycopg.connect(cluster.dsn()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
