"""Lost COMMIT response (SPEC §7, §10.6): committed on the server, the reply never arrives.

`WireFaultProxy` makes it deterministic: it forwards the Coordinator's COMMIT, waits for the
server to finish it, swallows the reply and resets the client connection. The Coordinator must
treat that as *uncertain*, settle it from the durable facts and never admit twice, with and without
a promotion of a synchronous standby in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import db_now_ms, wait_until
from psycopg.conninfo import make_conninfo
from ql3_cluster_postgres import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
DROPS = 3
PROMOTED_TIMELINE = 2


def _settled(replica: Replica) -> list[dict[str, object]]:
    return replica.events("uncertain.resolved")


def _drop_one_commit_reply(run: Scenario, proxy: WireFaultProxy, replica: Replica) -> str:
    """Arm one drop, check it happened, wait for the replica to settle it; return the outcome."""
    before_drops = proxy.commit_replies_dropped
    before_settled = len(_settled(replica))
    proxy.drop_next_commit_reply()
    wait_until(
        lambda: proxy.commit_replies_dropped > before_drops,
        timeout_s=15,
        what="the proxy swallowed a COMMIT reply",
    )
    try:
        wait_until(
            lambda: len(_settled(replica)) > before_settled,
            timeout_s=20,
            what=f"{replica.owner_id} settled its uncertain commit",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run.logs()}") from None
    return str(_settled(replica)[-1].get("outcome"))


def test_lost_commit_reply_is_settled_without_duplicates(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Three lost COMMIT replies are each settled as committed; the history stays exact."""
    run = scenario("lost-commit-reply", "6")
    run.prepare()
    assert run.cluster is not None
    proxy = WireFaultProxy(run.cluster.host, run.cluster.port).start()
    run.on_close(proxy.stop)
    proxied = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    proxied.wait_ready()
    run.add_schedules(2, window_s=14)
    outcomes = [_drop_one_commit_reply(run, proxy, proxied) for _ in range(DROPS)]
    # A direct replica joins only now (racing it earlier could starve the proxied one of the
    # commits the drops need); it shares the rest of the window.
    run.replica(lease_ms=LEASE_MS)
    run.fault(f"{DROPS} COMMIT replies swallowed by WireFaultProxy (connection reset after commit)")
    run.note(f"uncertain commits settled as: {', '.join(outcomes)}")
    assert set(outcomes) <= {"committed"}, outcomes
    run.wait_exhausted(timeout_s=30)
    run.finish(lateness_bound_ms=LEASE_MS + 10_000)


def test_lost_commit_reply_then_promotion(scenario: Callable[[str, str], Scenario]) -> None:
    """A COMMIT whose reply was lost survives promotion of a synchronous standby, exactly once."""
    run = scenario("lost-commit-reply-promotion", "6")
    run.prepare()
    primary = run.cluster
    assert primary is not None
    standby = primary.create_standby(synchronous=True)
    assert standby.timeline() == 1
    proxy = WireFaultProxy(primary.host, primary.port).start()
    run.on_close(proxy.stop)
    replica = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    replica.wait_ready()
    run.add_schedules(2, window_s=14)
    before = proxy.commit_replies_dropped
    proxy.drop_next_commit_reply()
    wait_until(
        lambda: proxy.commit_replies_dropped > before,
        timeout_s=15,
        what="the proxy swallowed a COMMIT reply",
    )
    run.fault("COMMIT reply swallowed (committed on the primary and its synchronous standby)")
    # Promote at once: the replica learns nothing from the old primary.
    primary.fence()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    proxy.set_upstream(standby.host, standby.port)
    proxy.reset_connections()
    run.fault("old primary fenced, synchronous standby promoted (timeline 1 -> 2)")
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    assert db_now_ms(new_admin) > 0
    try:
        wait_until(
            lambda: bool(_settled(replica)),
            timeout_s=30,
            what="the replica settled its uncertain commit on the new primary",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run.logs()}") from None
    outcome = str(_settled(replica)[-1].get("outcome"))
    run.note(f"uncertain commit settled as {outcome} on timeline {timeline}")
    assert outcome == "committed", run.logs()
    run.wait_exhausted(timeout_s=30, dsn=new_admin)
    assert _settled(replica)[-1].get("schedule_id") in run.schedules
    run.finish(dsn=new_admin, lateness_bound_ms=LEASE_MS + 20_000)
