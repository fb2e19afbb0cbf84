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

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness import SLACK, Bound, fetch, pause, wait_until
from psycopg.conninfo import make_conninfo
from ql3_testkit import ThrowawayCluster, WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
CUT_S = 3.0
FIRST = 2  # admissions before the cut
PROMOTED_TIMELINE = 2
# The replica backs off at most this long between reconnect tries (`QL3_RETRY_MAX_MS`; 10 s by
# default), so the lateness bound can name it.
RETRY_MAX_MS = 1_000
# How far apart the two looks at a quiet replica are (see _wait_quiescent).
QUIET_LOOK_S = 0.02
SENDERS_SQL = "SELECT count(*) FROM pg_stat_replication"
SYNC_WAIT_SQL = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
REPLAYED_SQL = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
OWN_RUNS_SQL = (
    "SELECT schedule_id, scheduled_for_ms, created_at_ms FROM ql3.runs WHERE owner_id = %s"
    " ORDER BY created_at_ms"
)
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


Occurrence = tuple[int, int]  # (schedule, occurrence)


@dataclass(frozen=True)
class Failover:
    """What the replica was told, what the old primary held, what the new primary has."""

    acknowledged: frozenset[Occurrence]  # identities of the admissions reported committed
    on_old: frozenset[Occurrence]  # its runs on the old primary, read before the fence
    on_new: frozenset[Occurrence]  # its runs on the promoted standby
    new_admin: str
    healed: float  # monotonic: the proxy forwards again, to the new primary

    @property
    def missing(self) -> frozenset[Occurrence]:
        """Runs the old primary had and the new one has not."""
        return self.on_old - self.on_new

    @property
    def lost(self) -> frozenset[Occurrence]:
        """Acknowledged admissions the new primary does not have."""
        return self.acknowledged - self.on_new


def _runs(dsn: str, owner: str) -> list[tuple[int, int, int]]:
    """(schedule, occurrence, created_at_ms) of the owner's runs, by creation."""
    return [(int(r[0]), int(r[1]), int(r[2])) for r in fetch(dsn, OWN_RUNS_SQL, (owner,))]


def _identities(runs: list[tuple[int, int, int]]) -> frozenset[Occurrence]:
    return frozenset((schedule, at) for schedule, at, _ in runs)


def _acknowledged(replica: Replica, runs: list[tuple[int, int, int]]) -> frozenset[Occurrence]:
    """Return the identities of the admissions the replica's cycle summaries report.

    One replica runs its cycles one after the other and a cycle commits only after its first
    claim, so a cycle that reports n admissions wrote exactly the first n of its runs created
    at or after its first claim's acquired time (both database times); earlier cycles' runs are
    all older. Fails if the summaries and the runs disagree.
    """
    acknowledged: set[Occurrence] = set()
    for summary in replica.events("cycle.summary"):
        count = int(summary.get("admitted", 0))
        if count == 0:
            continue
        first = int(summary["first_claim_acquired_at_ms"])
        mine = [(s, at) for s, at, created in runs if created >= first][:count]
        assert len(mine) == count, (
            f"a cycle from {first} reports {count} admissions, {len(mine)} runs follow it: {runs}"
        )
        acknowledged.update(mine)
    return frozenset(acknowledged)


def _main_thread_blocked(pid: int) -> bool:
    """Tell whether the process's main thread sleeps in the kernel (a poll, a lock), not running."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip() not in {"", "0"}
    except OSError:
        return False


def _wait_quiescent(replica: Replica, what: str) -> None:
    """Wait until the replica has acted on every reply it got: blocked, its log not growing.

    The replica is one thread doing one thing at a time: once it sleeps in the kernel twice
    QUIET_LOOK_S apart with the same log, it waits for a reply that is held (the proxy's
    partition, a commit waiting for the synchronous standby) or for its next due time, and
    every cycle it was told the end of has logged its summary.
    """
    process = replica.process
    assert process is not None

    def quiet() -> bool:
        size = replica.log_path.stat().st_size
        if not _main_thread_blocked(process.pid):
            return False
        time.sleep(QUIET_LOOK_S)  # the second look of one check, not a wait for an outcome
        return _main_thread_blocked(process.pid) and replica.log_path.stat().st_size == size

    wait_until(quiet, timeout_s=10, what=what, interval_s=0.01)


def _fail_over(
    run: Scenario,
    primary: ThrowawayCluster,
    standby: ThrowawayCluster,
    proxy: WireFaultProxy,
    replica: Replica,
) -> Failover:
    """Freeze the replica's view, read the old primary, fence, promote, read the new one."""
    proxy.partition()
    _wait_quiescent(replica, "the replica has logged every cycle it was told the end of")
    runs_old = _runs(run.dsn("admin"), replica.owner_id)
    acknowledged = _acknowledged(replica, runs_old)
    assert len(acknowledged) == replica.admitted(), "summaries name duplicate admissions"
    primary.fence()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    on_new = _identities(_runs(new_admin, replica.owner_id))
    run.fault(
        "replica's traffic held (proxy), old primary fenced, standby promoted (timeline 1 -> 2)"
    )
    proxy.set_upstream(standby.host, standby.port)
    proxy.heal()
    return Failover(acknowledged, _identities(runs_old), on_new, new_admin, time.monotonic())


def _bound(cut: float, failover: Failover) -> Bound:
    """Return the lateness bound of a failover after a cut at monotonic time `cut`.

    An occurrence due after the cut waits until the proxy forwards to the new primary
    (measured), then for the replica's next reconnect try (capped), and a claim standing on the
    new primary expires within a lease; then a cycle.
    """
    span_ms = int((failover.healed - cut) * 1000)
    return Bound.of(
        ("cut -> proxy forwards to the new primary, measured", span_ms),
        ("reconnect backoff cap", RETRY_MAX_MS),
        ("lease of a claim standing at the promotion", LEASE_MS),
        SLACK,
    )


def _start(run: Scenario, *, synchronous: bool) -> tuple[ThrowawayCluster, ThrowawayCluster]:
    run.prepare()
    primary = run.cluster
    assert primary is not None
    standby = primary.create_standby(synchronous=synchronous)
    return primary, standby


def _admitting_then_cut(
    run: Scenario, *, synchronous: bool
) -> tuple[ThrowawayCluster, ThrowawayCluster, WireFaultProxy, Replica, float]:
    """Primary + standby, one replica admitting through a proxy, then WAL streaming cut.

    Returns the clusters, the proxy, the replica and the cut's monotonic time.
    """
    primary, standby = _start(run, synchronous=synchronous)
    proxy = WireFaultProxy(primary.host, primary.port).start()
    run.on_close(proxy.stop)
    replica = run.replica(
        lease_ms=LEASE_MS,
        dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port)),
        env_extra={"QL3_RETRY_MAX_MS": str(RETRY_MAX_MS)},
    )
    replica.wait_ready()
    run.add_schedules(2, window_s=16)
    wait_until(lambda: replica.admitted() >= FIRST, timeout_s=10, what="first admissions")
    _cut_replication(primary, standby)
    cut = time.monotonic()
    kind = "synchronous" if synchronous else "asynchronous"
    run.fault(f"WAL streaming to the {kind} standby cut")
    return primary, standby, proxy, replica, cut


def test_async_replication_loses_acknowledged_admissions(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """With an asynchronous standby, admissions acknowledged after the cut vanish at promotion."""
    run = scenario("async-replication-loses-acks", "7")
    primary, standby, proxy, replica, cut = _admitting_then_cut(run, synchronous=False)
    pause(CUT_S)  # the fault window: the primary acknowledges what the standby never gets
    failover = _fail_over(run, primary, standby, proxy, replica)
    lost = failover.lost
    run.note(
        f"{len(failover.acknowledged)} admissions acknowledged, {len(failover.on_new)} on the new"
        f" timeline: {len(lost)} acknowledged admissions lost ({len(failover.missing)} runs of"
        " the old primary missing)"
    )
    assert lost, "asynchronous replication lost nothing: the hazard was not reproduced"
    assert lost <= failover.missing, sorted(lost - failover.missing)
    run.wait_exhausted(timeout_s=30, dsn=failover.new_admin)
    outcome = run.finish(dsn=failover.new_admin, bound=_bound(cut, failover))
    # Each lost occurrence was admitted again on the new timeline (under a new claim token).
    final = {(int(r[0]), int(r[1])) for r in fetch(failover.new_admin, RUNS_OF_SQL)}
    readmitted = lost & final
    assert readmitted == lost, f"lost and never admitted again: {sorted(lost - final)}"
    run.note(
        f"the {len(readmitted)} lost occurrences were admitted again on the new timeline, which"
        f" alone looks clean ({outcome.duplicated} duplicates there): a worker may run them twice"
        " -> QL3 requires a synchronous standby"
    )
    run.evidence.verdict = (
        f"{len(lost)} acknowledged admissions lost at promotion, {len(readmitted)} re-admitted on"
        " timeline 2 (the hazard, reproduced)"
    )


def test_sync_replication_keeps_acknowledged_admissions(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """With a synchronous standby nothing acknowledged is lost and the history stays exact."""
    run = scenario("sync-replication-keeps-acks", "7")
    primary, standby, proxy, replica, cut = _admitting_then_cut(run, synchronous=True)
    # Check the fault took effect: the replica's next write waits for the standby, unacknowledged.
    wait_until(
        lambda: int(fetch(primary.dsn(), SYNC_WAIT_SQL)[0][0]) > 0,
        timeout_s=10,
        what="a write on the primary waits for the synchronous standby",
    )
    # Nothing is acknowledged after the cut, so once the replica has logged what it was told
    # these are exactly the admissions acknowledged before it.
    _wait_quiescent(replica, "the replica waits on the standby with its summaries logged")
    before_cut = _acknowledged(replica, _runs(run.dsn("admin"), replica.owner_id))
    assert before_cut, "no admission was acknowledged before the cut: nothing to keep"
    pause(CUT_S)  # the fault window: nothing more may be acknowledged
    failover = _fail_over(run, primary, standby, proxy, replica)
    run.note(
        f"{len(before_cut)} admissions acknowledged before the cut, {len(failover.acknowledged)}"
        f" in all; {len(failover.on_new)} on the new timeline: {len(failover.lost)} lost;"
        f" {len(failover.missing)} committed on the old primary only, never acknowledged"
        " (waiting for the standby)"
    )
    assert failover.acknowledged == before_cut, (
        f"admissions acknowledged after the synchronous standby was cut off:"
        f" {sorted(failover.acknowledged - before_cut)}"
    )
    assert not failover.lost, f"lost acknowledged admissions: {sorted(failover.lost)}"
    run.wait_exhausted(timeout_s=30, dsn=failover.new_admin)
    settled = ", ".join(str(e.get("outcome")) for e in replica.events("uncertain.resolved"))
    run.note(
        f"uncertain commits settled as: {settled or 'none (the write that waited was a claim)'}"
    )
    run.finish(dsn=failover.new_admin, bound=_bound(cut, failover))
    run.evidence.verdict = f"{len(before_cut)} acknowledged before the cut, 0 lost"
