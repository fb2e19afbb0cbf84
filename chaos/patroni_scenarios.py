"""What the Patroni scenarios (test_patroni*.py) share: the cluster, replicas, recovery bound.

QL3 has no leader of its own, so it is exactly as available as the PostgreSQL cluster under it.
Each scenario starts Patroni (three members, etcd, `synchronous_mode`), a QL3 database on it,
REPLICAS replicas and SCHEDULES schedules. The replicas reach the cluster through the multi-host
DSN operators use (`host=a,b,c port=... target_session_attrs=read-write`), so after a failover
libpq finds the new leader by itself. After each fault, every admission a replica had
acknowledged must be in the database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import SLACK, Bound, wait_until
from ql3_testkit import PatroniCluster, prepare_ql3_database

if TYPE_CHECKING:
    from harness import Replica, Scenario

__all__ = [
    "LEASE_MS",
    "RECOVERY",
    "RUNTIME_USER",
    "acknowledged_admissions",
    "check_acknowledged_present",
    "start_cluster",
]

LEASE_MS = 2_000
REPLICAS = 2
SCHEDULES = 6
GRACE_MS = 300_000
RUNTIME_USER = "ql3_login_runtime"
OWN_RUNS_SQL = "SELECT count(*) FROM ql3.runs WHERE owner_id = %s"
# `ql3 run`'s retry_fast_ms default: while no member takes writes (a leader change), a replica
# retries every 50-100 ms (jittered), trying each host of its multi-host DSN.
RETRY_FAST_MS = 100
# From the new leader accepting writes to the first admission there: the replica's next fast
# retry, then a cycle (connect across the members, claim, a commit the synchronous standby
# acknowledges). Measured over 4 runs of patroni-failovers (24 failovers, load average ~5):
# switchover 3, 23, 32 / 138, 148, 203 / 38, 59, 126 / 84, 90, 132 ms; postmaster SIGKILL
# 1, 84, 90 / 85, 122, 186 / -33, 64, 92 / 36, 52, 92 ms; worst 203 ms. The bound, a fast
# retry plus a cycle slack (350 ms), is 1.7x the worst: EVIDENCE.md shows each run's measured
# worst, the test fails beyond this.
RECOVERY = Bound.of(("fast retry", RETRY_FAST_MS), SLACK)


def start_cluster(run: Scenario, window_s: float) -> PatroniCluster:
    """Start Patroni, a QL3 database on it, replicas on the multi-host DSN and schedules."""
    cluster = PatroniCluster().start()
    run.on_close(cluster.stop)
    run.db = prepare_ql3_database(cluster, "ql3_" + run.evidence.scenario.replace("-", "_"))
    for _ in range(REPLICAS):
        run.replica(lease_ms=LEASE_MS, claim_batch=4)
    run.wait_ready()
    # A grace far above any outage here: FIRE_ONCE must not coalesce what a failover delayed.
    run.add_schedules(SCHEDULES, window_s=window_s, grace_ms=GRACE_MS)
    wait_until(lambda: run.runs_count() >= SCHEDULES, timeout_s=15, what="first admissions")
    return cluster


def acknowledged_admissions(replicas: list[Replica]) -> dict[str, int]:
    """Admissions each replica's cycle summaries report as committed, so far."""
    return {replica.owner_id: replica.admitted() for replica in replicas}


def check_acknowledged_present(run: Scenario, acknowledged: dict[str, int], when: str) -> None:
    """Every admission a replica was told about is a run of that replica in the database."""
    for owner, count in acknowledged.items():
        present = int(run.fetch_admin(OWN_RUNS_SQL, (owner,))[0][0])
        assert present >= count, (
            f"{when}: {owner} acknowledged {count} admissions, only {present} are in the"
            f" database\n{run.logs()}"
        )
