"""PatroniCluster against real Patroni, etcd and PostgreSQL: start, switchover, failover, rejoin."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
from ql3_testkit import PatroniCluster, durable_write, durable_write_acknowledged_ms

MEMBERS = 3

NOW_MS = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _primary_port(cluster: PatroniCluster) -> int:
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('port')::int, pg_is_in_recovery()").fetchone()
    assert row is not None
    port, in_recovery = row
    assert not in_recovery
    return int(port)


def test_started_cluster_has_a_leader_a_sync_standby_and_a_multi_host_dsn(
    patroni_cluster: PatroniCluster,
) -> None:
    """Three members start under etcd; the multi-host DSN reaches the leader, whose commits wait."""
    state = patroni_cluster.state()
    assert sorted(state) == [member.name for member in patroni_cluster.members]
    leader = patroni_cluster.leader()
    assert leader is not None
    assert _primary_port(patroni_cluster) == patroni_cluster.member(leader).pg_port
    sync = patroni_cluster.sync_standby()
    assert sync is not None
    assert sync != leader
    with psycopg.connect(patroni_cluster.member_dsn(leader), autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('synchronous_standby_names') AS names,"
            " current_setting('synchronous_commit') AS mode"
        ).fetchone()
    assert row is not None
    assert sync in str(row[0])
    assert row[1] == "on"
    assert "port=" in patroni_cluster.dsn()
    assert "target_session_attrs=read-write" in patroni_cluster.dsn()
    assert durable_write(patroni_cluster.dsn())
    with psycopg.connect(patroni_cluster.member_dsn(leader), autocommit=True) as conn:
        before = conn.execute(NOW_MS).fetchone()
    acknowledged = durable_write_acknowledged_ms(patroni_cluster.member_dsn(leader))
    assert before is not None
    assert acknowledged is not None
    assert acknowledged >= int(before[0])
    # A standby takes no write: no acknowledgement time.
    assert durable_write_acknowledged_ms(patroni_cluster.member_dsn(sync)) is None


def test_switchover_then_postmaster_kill_move_the_leader_and_the_old_leaders_rejoin(
    patroni_cluster: PatroniCluster,
) -> None:
    """A switchover and a leader's postmaster SIGKILL each move the leader; old leaders rejoin."""
    first = patroni_cluster.leader()
    assert first is not None
    timeline = patroni_cluster.timeline()
    started = time.monotonic()
    old = patroni_cluster.switchover()
    assert old == first
    second, recovered_s = patroni_cluster.wait_new_leader(old, since=started)
    assert second != first
    assert recovered_s > 0
    patroni_cluster.wait_member_streaming(first)
    patroni_cluster.wait_healthy()
    assert patroni_cluster.timeline() > timeline
    assert _primary_port(patroni_cluster) == patroni_cluster.member(second).pg_port

    started = time.monotonic()
    old = patroni_cluster.kill_leader_postmaster()
    assert old == second
    third, _ = patroni_cluster.wait_new_leader(old, since=started)
    assert third != second
    patroni_cluster.wait_member_streaming(second)
    patroni_cluster.wait_healthy()
    assert _primary_port(patroni_cluster) == patroni_cluster.member(third).pg_port
    assert len(patroni_cluster.state()) == MEMBERS


def _running(pid: int) -> bool:
    """Tell whether `pid` still runs; a zombie has exited and counts as gone.

    Where PID 1 does not reap orphans (some containers), the killed Patroni's postmaster stays a
    zombie, which only its reaper can clear.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_stop_removes_every_process_and_the_folder() -> None:
    """stop() ends every Patroni, postmaster and etcd and removes the folder, even after a kill."""
    cluster = PatroniCluster().start()
    folder = cluster.base_dir
    members = list(cluster.members)
    leader = cluster.leader()
    assert leader is not None
    cluster.kill_patroni(leader)  # its postmaster lives on; stop() must still end it
    pids = [member.postmaster_pid() for member in members]
    assert None not in pids
    cluster.stop()
    assert not folder.exists()
    assert all(not member.patroni_alive for member in members)
    assert not any(_running(pid) for pid in pids if pid is not None)
