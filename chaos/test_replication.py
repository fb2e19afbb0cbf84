"""Asynchronous replication loses acknowledged admissions at promotion; a synchronous standby not.

Both runs: primary + standby, one `ql3 run` replica reaching the primary through a proxy (the
stable address that fails over). Replication is cut (the standby's `primary_conninfo` emptied),
the replica keeps working for a while, then the proxy stops forwarding (so what the replica has
been told is frozen), the old primary's runs are read, the primary is fenced, the standby
promoted, and the proxy sent to it. "Acknowledged" admissions are the ones the replica's cycle
summaries report as committed; the old primary's runs give their identities.

- Asynchronous: the primary keeps acknowledging commits that never reach the standby; after the
  promotion they are gone and the Coordinator admits those occurrences again on the new timeline.
  The new timeline's history is clean (the checker cannot see the lost one), which is exactly why
  QL3 requires a synchronous standby: this run documents the hazard, it is not a supported setup.
  It fails unless the hazard is reproduced: acknowledged admissions missing after the promotion,
  each admitted again on timeline 2.
- Synchronous (`synchronous_standby_names` + `synchronous_commit = on`): admissions acknowledged
  before the cut (required: > 0) are all on the new timeline; after the cut every write of the
  replica, its claims included, waits for the standby and none is acknowledged. A write that waited
  is committed on the old primary only, and is decided again on the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness import fetch, pause, wait_until
from psycopg.conninfo import make_conninfo
from ql3_testkit import ThrowawayCluster, WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
CUT_S = 3.0
FIRST = 2  # admissions before the cut
PROMOTED_TIMELINE = 2
# A cycle's summary is logged when it ends, milliseconds after its last reply; the proxy holds
# every later reply, so this pause only lets the replica finish writing what it was told.
SUMMARY_FLUSH_S = 1.0
SENDERS_SQL = "SELECT count(*) FROM pg_stat_replication"
SYNC_WAIT_SQL = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
REPLAYED_SQL = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
OWN_RUNS_SQL = "SELECT schedule_id, scheduled_for_ms FROM ql3.runs WHERE owner_id = %s"
RUNS_OF_SQL = "SELECT schedule_id, scheduled_for_ms, claim_token::text FROM ql3.runs"


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


@dataclass(frozen=True)
class Failover:
    """What the replica was told, what the old primary held, what the new primary has."""

    acknowledged: int  # admissions the replica's cycle summaries report as committed
    on_old: frozenset[tuple[int, int]]  # its runs on the old primary, read before the fence
    on_new: frozenset[tuple[int, int]]  # its runs on the promoted standby
    new_admin: str

    @property
    def missing(self) -> frozenset[tuple[int, int]]:
        """Runs the old primary had and the new one has not."""
        return self.on_old - self.on_new


def _runs(dsn: str, owner: str) -> frozenset[tuple[int, int]]:
    return frozenset((int(r[0]), int(r[1])) for r in fetch(dsn, OWN_RUNS_SQL, (owner,)))


def _fail_over(
    run: Scenario,
    primary: ThrowawayCluster,
    standby: ThrowawayCluster,
    proxy: WireFaultProxy,
    replica: Replica,
) -> Failover:
    """Freeze the replica's view, read the old primary, fence, promote, read the new one."""
    proxy.partition()
    pause(SUMMARY_FLUSH_S)
    acknowledged = replica.admitted()
    on_old = _runs(run.dsn("admin"), replica.owner_id)
    primary.fence()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    on_new = _runs(new_admin, replica.owner_id)
    run.fault(
        "replica's traffic held (proxy), old primary fenced, standby promoted (timeline 1 -> 2)"
    )
    proxy.set_upstream(standby.host, standby.port)
    proxy.heal()
    return Failover(acknowledged, on_old, on_new, new_admin)


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
    failover = _fail_over(run, primary, standby, proxy, replica)
    survived = len(failover.on_new)
    lost = failover.acknowledged - survived
    missing = failover.missing
    run.note(
        f"{failover.acknowledged} admissions acknowledged, {survived} on the new timeline:"
        f" {lost} acknowledged admissions lost ({len(missing)} runs of the old primary missing)"
    )
    assert lost > 0, "asynchronous replication lost nothing: the hazard was not reproduced"
    assert len(missing) >= lost, (
        failover.acknowledged,
        sorted(failover.on_old),
        sorted(failover.on_new),
    )
    run.wait_exhausted(timeout_s=30, dsn=failover.new_admin)
    outcome = run.finish(dsn=failover.new_admin)
    # Each lost occurrence was admitted again on the new timeline (under a new claim token).
    final = {(int(r[0]), int(r[1])) for r in fetch(failover.new_admin, RUNS_OF_SQL)}
    readmitted = missing & final
    assert readmitted == missing, f"lost and never admitted again: {sorted(missing - final)}"
    run.note(
        f"the {len(readmitted)} lost occurrences were admitted again on the new timeline, which"
        f" alone looks clean ({outcome.duplicated} duplicates there): a worker may run them twice"
        " -> QL3 requires a synchronous standby"
    )
    run.evidence.verdict = (
        f"{lost} acknowledged admissions lost at promotion, {len(readmitted)} re-admitted on"
        " timeline 2 (the hazard, reproduced)"
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
        what="a write on the primary waits for the synchronous standby",
    )
    # Nothing is acknowledged after the cut, so once the summaries are written this counts
    # exactly the admissions acknowledged before it.
    pause(SUMMARY_FLUSH_S)
    before_cut = replica.admitted()
    assert before_cut > 0, "no admission was acknowledged before the cut: nothing to keep"
    pause(CUT_S)
    failover = _fail_over(run, primary, standby, proxy, replica)
    survived = len(failover.on_new)
    run.note(
        f"{before_cut} admissions acknowledged before the cut, {failover.acknowledged} in all;"
        f" {survived} on the new timeline: 0 lost; {len(failover.missing)} committed on the old"
        " primary only, never acknowledged (waiting for the standby)"
    )
    assert failover.acknowledged == before_cut, (
        f"{failover.acknowledged - before_cut} admissions acknowledged after the synchronous"
        " standby was cut off"
    )
    assert survived >= failover.acknowledged, (
        f"lost acknowledged admissions: {failover.acknowledged - survived}"
    )
    run.wait_exhausted(timeout_s=30, dsn=failover.new_admin)
    settled = ", ".join(str(e.get("outcome")) for e in replica.events("uncertain.resolved"))
    run.note(
        f"uncertain commits settled as: {settled or 'none (the write that waited was a claim)'}"
    )
    run.finish(dsn=failover.new_admin)
    run.evidence.verdict = f"{before_cut} acknowledged before the cut, 0 lost"
