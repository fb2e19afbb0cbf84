"""Lost COMMIT response (DESIGN §6): committed on the server, the reply never arrives.

`WireFaultProxy` makes it deterministic: it forwards the Coordinator's COMMIT, waits for the
server to finish it, swallows the reply and resets the client connection. The Coordinator must
treat that as *uncertain*, settle it from the durable facts and never admit twice, with and without
a promotion of a synchronous standby in between.

The headline fault is checked in the database, not taken from the replica's word: before each
drop is armed, the proxy's new connections are parked on a port that never answers (open ones
keep flowing), so after the reset the replica cannot reach the server again until the harness
lets it. While it is parked, the harness reads the server directly: the swallowed transaction's
runs (the newest claim token of that replica) exist and were created before the drop was seen.
Only then is the replica let through to settle; it must settle exactly those schedules as
`committed`, and a settle that had to commit again would show up as a run created later.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness import SLACK, Bound, db_now_ms, fetch, wait_until
from psycopg.conninfo import make_conninfo
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario
    from ql3_testkit import ThrowawayCluster

LEASE_MS = 2_000
DROPS = 3
PROMOTED_TIMELINE = 2
# `ql3 run --retry-initial-ms` default: retry n after a failed connect waits at most
# FIRST_RETRY_MS * 2**(n-1); a parked connect fails only at `--connect-timeout` (default 5 s)
# or when the park ends, so a park shorter than that costs one first retry.
FIRST_RETRY_MS = 200
CONNECT_TIMEOUT_MS = 5_000
# Runs of one replica newer than a known id, newest first.
NEWER_RUNS_SQL = (
    "SELECT id, schedule_id, scheduled_for_ms, created_at_ms, claim_token::text FROM ql3.runs"
    " WHERE owner_id = %s AND id > %s ORDER BY id DESC"
)
MAX_ID_SQL = "SELECT coalesce(max(id), 0) FROM ql3.runs"


class Blackhole:
    """A loopback port that completes TCP handshakes and never answers: connections to it hang.

    Closing it resets the connections still queued on it, so a client waiting there fails at
    once instead of after its connect timeout.
    """

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])

    def close(self) -> None:
        """Stop listening; queued connections get a reset."""
        self.sock.close()


@dataclass(frozen=True)
class LostCommit:
    """What the database showed about one swallowed COMMIT while its replica was parked."""

    claim_token: str
    schedules: frozenset[int]
    runs: int
    seen_at_ms: int


def _settled(replica: Replica) -> list[dict[str, object]]:
    return replica.events("uncertain.resolved")


class CommitCatcher:
    """Swallows one COMMIT reply of `replica` at a time and proves it committed on the server."""

    def __init__(self, run: Scenario, proxy: WireFaultProxy, replica: Replica) -> None:
        self.run = run
        self.proxy = proxy
        self.replica = replica
        self.parked_ms: list[int] = []  # per drop: how long the replica could not reconnect
        self._blackhole: Blackhole | None = None
        self._upstream = proxy.upstream
        self._parked_from = 0.0
        self._settled_before = 0

    def swallow(self, server: ThrowawayCluster) -> LostCommit:
        """Park new connections, swallow one COMMIT reply, read its runs from `server` directly.

        Returns with the replica parked: call `release()` (after fencing and promoting, in the
        promotion test).
        """
        direct = make_conninfo(self.run.dsn("admin"), host=server.host, port=str(server.port))
        before_id = int(fetch(direct, MAX_ID_SQL)[0][0])
        self._settled_before = len(_settled(self.replica))
        self._upstream = self.proxy.upstream
        self._blackhole = Blackhole()
        self.run.on_close(self._blackhole.close)
        self.proxy.set_upstream("127.0.0.1", self._blackhole.port)
        before_drops = self.proxy.commit_replies_dropped
        self.proxy.drop_next_commit_reply()
        wait_until(
            lambda: self.proxy.commit_replies_dropped > before_drops,
            timeout_s=15,
            what="the proxy swallowed a COMMIT reply",
            interval_s=0.002,
        )
        self._parked_from = time.monotonic()
        seen_at = db_now_ms(direct)
        rows = fetch(direct, NEWER_RUNS_SQL, (self.replica.owner_id, before_id))
        assert rows, (
            f"no run of {self.replica.owner_id} on the server after the swallowed COMMIT: it"
            f" did not commit\n{self.run.logs()}"
        )
        token = str(rows[0][4])
        mine = [row for row in rows if row[4] == token]
        late = [row for row in mine if int(row[3]) > seen_at]
        assert not late, (
            f"runs of the swallowed COMMIT created after it was seen ({seen_at}): {late}"
        )
        return LostCommit(token, frozenset(int(row[1]) for row in mine), len(mine), seen_at)

    def release(self, upstream: tuple[str, int] | None = None) -> None:
        """Point new connections at `upstream` (default: where they went) and let them through."""
        assert self._blackhole is not None
        self.proxy.set_upstream(*(upstream or self._upstream))
        self._blackhole.close()  # the replica's parked connect fails now, not at its timeout
        self._blackhole = None
        # The drop was seen within one 2 ms poll of happening.
        self.parked_ms.append(round((time.monotonic() - self._parked_from) * 1000) + 2)

    def wait_settled(self, lost: LostCommit) -> list[str]:
        """Wait until the replica settled every schedule of `lost`; return those outcomes."""

        def mine() -> list[dict[str, object]]:
            new = _settled(self.replica)[self._settled_before :]
            return [e for e in new if int(str(e.get("schedule_id"))) in lost.schedules]

        try:
            wait_until(
                lambda: {int(str(e.get("schedule_id"))) for e in mine()} >= lost.schedules,
                timeout_s=30,
                what=f"{self.replica.owner_id} settled its lost commit",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.run.logs()}") from None
        return [str(e.get("outcome")) for e in mine()]

    def bound(self, *extra: tuple[str, int]) -> Bound:
        """Lateness: the longest park, the retry that ends it, `extra`, then a cycle slack."""
        parked = max(self.parked_ms, default=0)
        failed = 1 + parked // CONNECT_TIMEOUT_MS  # connects that hung until a timeout or the end
        return Bound.of(
            ("longest park (measured)", parked),
            (f"retry {failed} after the park", FIRST_RETRY_MS * 2 ** (failed - 1)),
            *extra,
            SLACK,
        )


def test_lost_commit_reply_is_settled_without_duplicates(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Three lost COMMIT replies, each committed on the server, are settled as committed."""
    run = scenario("lost-commit-reply", "6")
    run.prepare()
    cluster = run.cluster
    assert cluster is not None
    proxy = WireFaultProxy(cluster.host, cluster.port).start()
    run.on_close(proxy.stop)
    proxied = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    proxied.wait_ready()
    run.add_schedules(2, window_s=14)
    catcher = CommitCatcher(run, proxy, proxied)
    outcomes: list[str] = []
    runs_lost = 0
    for _ in range(DROPS):
        lost = catcher.swallow(cluster)
        catcher.release()
        outcomes += catcher.wait_settled(lost)
        runs_lost += lost.runs
    # A direct replica joins only now (racing it earlier could starve the proxied one of the
    # commits the drops need); it shares the rest of the window.
    run.replica(lease_ms=LEASE_MS)
    run.fault(f"{DROPS} COMMIT replies swallowed by WireFaultProxy (connection reset after commit)")
    run.note(
        f"the {DROPS} swallowed COMMITs had written {runs_lost} runs on the server before the"
        f" reset (read there while the replica was parked {max(catcher.parked_ms)} ms at most);"
        f" settled as: {', '.join(outcomes)}"
    )
    assert outcomes, "nothing was settled"
    assert set(outcomes) == {"committed"}, outcomes
    run.wait_exhausted(timeout_s=30)
    run.finish(bound=catcher.bound())
    run.evidence.verdict = (
        f"{DROPS} swallowed COMMITs found committed on the server, all settled as committed"
    )


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
    catcher = CommitCatcher(run, proxy, replica)
    lost = catcher.swallow(primary)
    run.fault("COMMIT reply swallowed (committed on the primary and its synchronous standby)")
    # Promote while the replica is parked: it learns nothing from the old primary.
    primary.fence()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    survived = fetch(new_admin, "SELECT count(*) FROM ql3.runs WHERE claim_token = %s::uuid",
                     (lost.claim_token,))  # fmt: skip
    assert int(survived[0][0]) == lost.runs, (
        f"the swallowed COMMIT's {lost.runs} runs are not all on the promoted standby: {survived}"
    )
    # Its LISTEN connection died with the fenced primary (the proxy resets a link whose server
    # is gone); the parked connect is let through to the new primary.
    catcher.release((standby.host, standby.port))
    run.fault("old primary fenced, synchronous standby promoted (timeline 1 -> 2)")
    outcomes = catcher.wait_settled(lost)
    run.note(
        f"the swallowed COMMIT's {lost.runs} runs were on the primary before the reset and on"
        f" the standby after promotion; settled as {', '.join(outcomes)} on timeline {timeline}"
        f" (replica parked {max(catcher.parked_ms)} ms, fence and promotion included)"
    )
    assert set(outcomes) == {"committed"}, run.logs()
    run.wait_exhausted(timeout_s=30, dsn=new_admin)
    # The dead LISTEN connection surfaces as a fault when the replica next idles: one more retry.
    run.finish(dsn=new_admin, bound=catcher.bound(("retry after the dead LISTEN", FIRST_RETRY_MS)))
    run.evidence.verdict = (
        "swallowed COMMIT found on primary and promoted standby, settled committed"
    )
