"""Asynchronous replication loses acknowledged admissions at promotion; a synchronous standby not.

Both runs: primary + standby, one `ql3 run` replica reaching the primary through a proxy (the
stable address that fails over). Replication is cut (the standby's `primary_conninfo` emptied),
the replica keeps working for a while, the primary is fenced, the standby promoted, and the proxy
sent to it. "Acknowledged" admissions are the ones the replica's cycle summaries report as
committed before the fence.

- Asynchronous: the primary keeps acknowledging commits that never reach the standby; after the
  promotion they are gone and the Coordinator admits those occurrences again on the new timeline.
  The new timeline's history is clean (the checker cannot see the lost one), which is exactly why
  QL3 requires a synchronous standby: this run documents the hazard, it is not a supported setup.
- Synchronous (`synchronous_standby_names` + `synchronous_commit = on`): with the standby cut off
  every commit waits and none is acknowledged, so nothing acknowledged is lost; the waiting
  commit becomes *uncertain* and is settled on the new primary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import fetch, pause, wait_until
from psycopg.conninfo import make_conninfo
from ql3_cluster_postgres import ThrowawayCluster, WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
CUT_S = 3.0
FIRST = 2  # admissions before the cut
PROMOTED_TIMELINE = 2
SENDERS_SQL = "SELECT count(*) FROM pg_stat_replication"
SYNC_WAIT_SQL = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
REPLAYED_SQL = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
OWN_RUNS_SQL = "SELECT count(*) FROM ql3.runs WHERE owner_id = %s"


def _cut_replication(primary: ThrowawayCluster, standby: ThrowawayCluster) -> None:
    """Let the standby catch up, then stop WAL streaming and check that it stopped."""
    lsn = fetch(primary.dsn(), "SELECT pg_current_wal_insert_lsn()::text")[0][0]
    wait_until(
        lambda: bool(fetch(standby.dsn(), REPLAYED_SQL, (lsn,))[0][0]),
        timeout_s=15,
        what="the standby replayed everything so far",
    )
    fetch(standby.dsn(), "ALTER SYSTEM SET primary_conninfo = ''")
    fetch(standby.dsn(), "SELECT pg_reload_conf()")
    wait_until(
        lambda: int(fetch(primary.dsn(), SENDERS_SQL)[0][0]) == 0,
        timeout_s=15,
        what="the primary has no WAL sender any more",
    )


def _fail_over(
    run: Scenario, primary: ThrowawayCluster, standby: ThrowawayCluster, replica: Replica
) -> tuple[int, int, str]:
    """Fence, promote; return (acknowledged admissions, those on the new primary, new DSN)."""
    primary.fence()
    pause(1.0)  # let the replica log the summary of a cycle acknowledged just before the fence
    acknowledged = replica.admitted()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    survived = int(fetch(new_admin, OWN_RUNS_SQL, (replica.owner_id,))[0][0])
    run.fault("old primary fenced, standby promoted (timeline 1 -> 2)")
    return acknowledged, survived, new_admin


def _start(run: Scenario, *, synchronous: bool) -> tuple[ThrowawayCluster, ThrowawayCluster]:
    run.prepare()
    primary = run.cluster
    assert primary is not None
    standby = primary.create_standby(synchronous=synchronous)
    return primary, standby


def _admitting_then_cut(
    run: Scenario, *, synchronous: bool
) -> tuple[ThrowawayCluster, ThrowawayCluster, WireFaultProxy, Replica]:
    """Primary + standby, one replica admitting through a proxy, then WAL streaming cut."""
    primary, standby = _start(run, synchronous=synchronous)
    proxy = WireFaultProxy(primary.host, primary.port).start()
    run.on_close(proxy.stop)
    replica = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    replica.wait_ready()
    run.add_schedules(2, window_s=16)
    wait_until(lambda: replica.admitted() >= FIRST, timeout_s=10, what="first admissions")
    _cut_replication(primary, standby)
    kind = "synchronous" if synchronous else "asynchronous"
    run.fault(f"WAL streaming to the {kind} standby cut")
    return primary, standby, proxy, replica


def test_async_replication_loses_acknowledged_admissions(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """With an asynchronous standby, admissions acknowledged after the cut vanish at promotion."""
    run = scenario("async-replication-loses-acks", "7")
    primary, standby, proxy, replica = _admitting_then_cut(run, synchronous=False)
    pause(CUT_S)
    acknowledged, survived, new_admin = _fail_over(run, primary, standby, replica)
    lost = acknowledged - survived
    run.note(f"{acknowledged} admissions acknowledged, {survived} on the new timeline: {lost} lost")
    assert lost > 0, "asynchronous replication lost nothing: the hazard was not reproduced"
    proxy.set_upstream(standby.host, standby.port)
    proxy.reset_connections()
    run.wait_exhausted(timeout_s=30, dsn=new_admin)
    outcome = run.finish(dsn=new_admin)
    run.note(
        f"the {lost} lost occurrences were admitted again on the new timeline, which alone looks"
        f" clean ({outcome.duplicated} duplicates there): a worker may run them twice -> QL3"
        " requires a synchronous standby"
    )


def test_sync_replication_keeps_acknowledged_admissions(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """With a synchronous standby nothing acknowledged is lost and the history stays exact."""
    run = scenario("sync-replication-keeps-acks", "7")
    primary, standby, proxy, replica = _admitting_then_cut(run, synchronous=True)
    # Check the fault took effect: the replica's next write waits for the standby, unacknowledged.
    wait_until(
        lambda: int(fetch(primary.dsn(), SYNC_WAIT_SQL)[0][0]) > 0,
        timeout_s=10,
        what="a commit on the primary waits for the synchronous standby",
    )
    pause(CUT_S)
    acknowledged, survived, new_admin = _fail_over(run, primary, standby, replica)
    run.note(f"{acknowledged} admissions acknowledged, {survived} on the new timeline: 0 lost")
    assert survived >= acknowledged, f"lost acknowledged admissions: {acknowledged - survived}"
    proxy.set_upstream(standby.host, standby.port)
    proxy.reset_connections()
    run.wait_exhausted(timeout_s=30, dsn=new_admin)
    settled = ", ".join(str(e.get("outcome")) for e in replica.events("uncertain.resolved"))
    run.note(f"uncertain commits settled as: {settled or 'none'}")
    run.finish(dsn=new_admin)
