"""Server crash right after claims, on a durable cluster: a claim lost with the crash is harmless.

The claim statement commits without waiting for its WAL flush (DESIGN §3,
`claim_due_schedules.sql`); the fenced commit still waits. The argument: a claim only sets a lease,
nothing is admitted on its strength until the fenced commit proves it, and a durable fenced commit
implies a durable claim (WAL is flushed in order). This scenario checks it end to end: three
replicas on a durable cluster (fsync, synchronous_commit on); the harness polls the schedules
until claims are visible and then shuts the server down immediately (SIGQUIT: no checkpoint, the
unflushed WAL tail is gone) and starts it again; CRASHES times. Each crash is proven to land while
a replica holds a claim: the harness locks the claimed rows (`FOR UPDATE`) and reads their claims
inside that lock, so no holder can commit or release them before the crash ends the lock. The
claims seen before each crash that neither survived it nor were fenced are counted as lost. The
history must be exact: every occurrence of the `catch_up` schedules admitted once, none early,
rows 1:1:2, no claim left.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import TYPE_CHECKING

import psycopg
from harness import SLACK, Bound, wait_until
from ql3_runtime_core import MisfirePolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 2_000
CRASHES = 4
WINDOW_S = 24
# Replicas back off at most this long between reconnect tries (`QL3_RETRY_MAX_MS`; 10 s by
# default): a reconnect try follows the server's return within it.
RETRY_MAX_MS = 1_000
# Claimed rows, locked: while this transaction holds them no holder can commit or release the
# claim (both update the row), so the claims read here still stand when the server crashes.
HOLD_CLAIMS_SQL = (
    "SELECT id, claim_token::text AS token, claim_owner_id AS owner FROM ql3.trigger_schedules"
    " WHERE claim_token IS NOT NULL FOR UPDATE SKIP LOCKED"
)
# Tokens that still hold a row or wrote a run after the restart.
KEPT_SQL = (
    "SELECT claim_token::text FROM ql3.trigger_schedules WHERE claim_token::text = ANY(%s)"
    " UNION SELECT claim_token::text FROM ql3.runs WHERE claim_token::text = ANY(%s)"
)
RUNS_SINCE_SQL = "SELECT count(*) FROM ql3.runs WHERE created_at_ms > %s"
NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _admitted_since(run: Scenario, since_ms: int) -> bool:
    return int(run.fetch_superuser(RUNS_SINCE_SQL, (since_ms,))[0][0]) > 0


def _crash_holding_claims(run: Scenario) -> tuple[list[tuple[int, str, str]], int, int]:
    """Crash the server while claims are held (under our lock); restart it.

    Returns (the held claims (schedule, token, owner), how many were lost, the outage in ms).
    """
    assert run.cluster is not None
    conn = psycopg.connect(run.database.superuser_dsn, connect_timeout=5)
    held: list[tuple[int, str, str]] = []

    def claims_held() -> bool:
        held[:] = [
            (int(row[0]), str(row[1]), str(row[2]))
            for row in conn.execute(HOLD_CLAIMS_SQL).fetchall()
        ]
        if not held:
            conn.rollback()  # no lock kept, a fresh snapshot next time
        return bool(held)

    try:
        wait_until(claims_held, timeout_s=15, what="a replica holds a claim", interval_s=0.001)
        crashed = time.monotonic()
        run.cluster.restart()  # immediate shutdown (our lock still held), then start again
        outage_ms = int((time.monotonic() - crashed) * 1000)
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.close()
    tokens = sorted({token for _, token, _ in held})
    # A token that neither holds a row nor wrote a run was lost with the crash.
    kept = {str(row[0]) for row in run.fetch_superuser(KEPT_SQL, (tokens, tokens))}
    return held, sum(1 for _, token, _ in held if token not in kept), outage_ms


def test_claims_lost_in_a_crash_admit_nothing_twice(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Crashing a durable server while claims are held loses no occurrence and doubles none."""
    run = scenario("claim crash", "12.3")
    run.prepare(durable=True)
    for _ in range(3):
        run.replica(lease_ms=LEASE_MS, env_extra={"QL3_RETRY_MAX_MS": str(RETRY_MAX_MS)})
    run.wait_ready()
    run.add_schedules(6, window_s=WINDOW_S, policy=MisfirePolicy.CATCH_UP)
    seen = lost = longest_outage = 0
    holders: set[str] = set()
    for _ in range(CRASHES):
        # The replicas are admitting again (a run written since the last restart) before the
        # next crash: each crash hits a working cluster, not one still recovering.
        since = int(run.fetch_superuser(NOW_SQL)[0][0])
        wait_until(
            functools.partial(_admitted_since, run, since),
            timeout_s=15,
            what="a run admitted since the last restart",
        )
        held, gone, outage_ms = _crash_holding_claims(run)
        seen += len(held)
        lost += gone
        longest_outage = max(longest_outage, outage_ms)
        holders.update(owner for _, _, owner in held)
        run.fault(
            f"server immediate shutdown while {len(held)} claim(s) were held (locked, read"
            f" under the lock), then restart ({outage_ms} ms)"
        )
    run.note(
        f"{seen} claims held at the crashes (by {', '.join(sorted(holders))}); {lost} neither"
        f" survived nor were fenced; longest outage {longest_outage} ms"
    )
    wait_until(lambda: all(r.alive for r in run.replicas), timeout_s=5, what="replicas alive")
    run.wait_exhausted(timeout_s=WINDOW_S + 60)
    # An occurrence due at a crash waits for the server (the measured outage), then for a
    # replica's next reconnect try (backoff capped at RETRY_MAX_MS), and, if its claim survived
    # the crash, for that claim to expire (the lease, counted from the crash); then a cycle.
    bound = Bound.of(
        ("outage, longest measured", longest_outage),
        ("reconnect backoff cap", RETRY_MAX_MS),
        ("lease of a claim held at the crash", LEASE_MS),
        SLACK,
    )
    outcome = run.finish(bound=bound)
    assert outcome.expected >= 6 * (WINDOW_S - 1)
