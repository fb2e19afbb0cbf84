"""Network faults between a replica and PostgreSQL, the replica in its own network namespace.

Faults, in order: 30 % packet loss (iptables statistic), a full partition that starts in the
middle of a commit (the COMMIT packet is dropped first, then everything), and on a second,
host-side replica: delay and connection resets through `WireFaultProxy`. A partitioned replica
must not keep the schedule rows locked: the server ends its session (here
`idle_in_transaction_session_timeout` and TCP keepalives / `tcp_user_timeout`, the settings the
README's operations section documents), the other replica takes over after the claim's expiry,
and the partitioned replica recovers after the heal. Bound: every occurrence is admitted within
lease + idle_in_transaction_session_timeout + 10 s of its time (16 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import pause, wait_until
from netns import NetNamespace, require_network_tools
from ql3_cluster_postgres import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 3_000
IDLE_IN_TRANSACTION_MS = 3_000
# A partitioned replica's half-done commit keeps its schedule rows locked until the server ends
# the session (idle_in_transaction_session_timeout); then the claim's lease, then 10 s of slack
# for reconnects, backoff and a busy machine.
BOUND_MS = LEASE_MS + IDLE_IN_TRANSACTION_MS + 10_000
LOSS = 0.3
LOSS_S = 6.0
PARTITION_S = 8.0
PROXY_DELAY_MS = 40
SERVER_SETTINGS = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_MS),
}
ADMITTED_SINCE_SQL = (
    "SELECT min(created_at_ms) FROM ql3.runs WHERE owner_id = %s AND created_at_ms > %s"
    " HAVING count(*) > 0"
)
STUCK_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE client_addr = %s::inet"
    " AND state LIKE 'idle in transaction%%'"
)


def test_network_faults_heal_without_loss_or_doubling(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Loss, a partition mid-commit, delay and resets: history exact, recovery within the bound."""
    require_network_tools()
    run = scenario("network-faults", "7")
    ns = NetNamespace(1).create()
    run.on_close(ns.destroy)
    settings = {"listen_addresses": f"127.0.0.1,{ns.host_ip}", **SERVER_SETTINGS}
    run.prepare(settings=settings)
    cluster = run.cluster
    assert cluster is not None
    hba = cluster.data_dir / "pg_hba.conf"
    with hba.open("a", encoding="utf-8") as conf:
        conf.write(f"host all all {ns.ns_ip}/32 scram-sha-256\n")
    run.fetch_superuser("SELECT pg_reload_conf()")
    assert ns.can_reach(cluster.port), "set-up: the namespace cannot reach PostgreSQL"

    inside = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host=ns.host_ip), prefix=ns.prefix
    )
    proxy = WireFaultProxy(cluster.host, cluster.port).start()
    run.on_close(proxy.stop)
    proxy.set_delay_ms(PROXY_DELAY_MS)
    outside = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    run.wait_ready()
    run.add_schedules(3, window_s=LOSS_S + PARTITION_S + 14)
    run.fault(f"host-side replica behind a proxy adding {PROXY_DELAY_MS} ms per message")

    # -- packet loss ---------------------------------------------------------------------------
    ns.add_loss(LOSS)
    proxy.reset_connections()
    run.fault(f"{LOSS:.0%} packet loss for {LOSS_S:.0f} s (iptables statistic)")
    run.fault("host-side replica's connections reset once (proxy)")
    pause(LOSS_S)
    lost = ns.dropped()
    assert lost > 0, "the loss rule dropped nothing"
    ns.heal()
    run.note(f"{lost} packets dropped by the loss rule")

    # -- partition in the middle of a commit -----------------------------------------------
    ns.drop_commits()
    wait_until(lambda: ns.dropped_commits() > 0, timeout_s=20, what="a COMMIT packet was dropped")
    ns.partition()
    assert not ns.can_reach(cluster.port), "the partition did not cut the namespace off"
    run.fault(f"COMMIT packet dropped, then full partition for {PARTITION_S:.0f} s")
    # The server must not keep the half-done transaction (and its row locks) for minutes.
    wait_until(
        lambda: int(run.fetch_superuser(STUCK_SQL, (ns.ns_ip,))[0][0]) == 0,
        timeout_s=IDLE_IN_TRANSACTION_MS / 1000 + 5,
        what="the server ended the partitioned replica's open transaction",
    )
    pause(PARTITION_S)
    ns.heal()
    healed_at = run.now_ms()
    assert ns.can_reach(cluster.port), "the heal did not restore the link"
    # Recovery: the host-side replica stops, so the partitioned one must carry on alone.
    outside.stop()
    wait_until(
        lambda: bool(run.fetch_admin(ADMITTED_SINCE_SQL, (inside.owner_id, healed_at))),
        timeout_s=BOUND_MS / 1000,
        what=f"{inside.owner_id} admits again after the heal",
    )
    first = int(run.fetch_admin(ADMITTED_SINCE_SQL, (inside.owner_id, healed_at))[0][0])
    run.note(f"partitioned replica committed again {first - healed_at} ms after the heal")
    settled = inside.events("uncertain.resolved")
    run.note(
        "its uncertain commits settled as: " + ", ".join(str(e.get("outcome")) for e in settled)
    )
    run.wait_exhausted(timeout_s=30)
    outcome = run.finish(lateness_bound_ms=BOUND_MS)
    run.note(f"max lateness {outcome.max_lateness_ms} ms (bound {BOUND_MS} ms)")
