"""Server crash right after claims, on a durable cluster: a claim lost with the crash is harmless.

The claim statement commits without waiting for its WAL flush (issue 12.3,
`claim_due_schedules.sql`); the fenced commit still waits. The argument: a claim only sets a lease,
nothing is admitted on its strength until the fenced commit proves it, and a durable fenced commit
implies a durable claim (WAL is flushed in order). This scenario checks it end to end: three
replicas on a durable cluster (fsync, synchronous_commit on); the harness polls the schedules
until claims are visible and then shuts the server down immediately (SIGQUIT: no checkpoint, the
unflushed WAL tail is gone) and starts it again; CRASHES times. The claims seen before each crash
that neither survived it nor were fenced are counted as lost. The history must be exact: every
occurrence of the `catch_up` schedules admitted once, none early, rows 1:1:2, no claim left.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from harness import wait_until
from ql3_runtime_core import MisfirePolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 2_000
CRASHES = 4
WINDOW_S = 24
CLAIM_HUNT_S = 3.0
CLAIMS_SQL = "SELECT id, claim_token::text FROM ql3.trigger_schedules WHERE claim_token IS NOT NULL"
# Tokens that still hold a row or wrote a run after the restart.
KEPT_SQL = (
    "SELECT claim_token::text FROM ql3.trigger_schedules WHERE claim_token::text = ANY(%s)"
    " UNION SELECT claim_token::text FROM ql3.runs WHERE claim_token::text = ANY(%s)"
)


def _crash_after_claims(run: Scenario) -> tuple[int, int]:
    """Wait for visible claims, crash and restart the server; return (claims seen, claims lost)."""
    assert run.cluster is not None
    deadline = time.monotonic() + CLAIM_HUNT_S
    seen: list[tuple[int, str]] = []
    while time.monotonic() < deadline and not seen:
        seen = [(int(row[0]), str(row[1])) for row in run.fetch_superuser(CLAIMS_SQL)]
        if not seen:
            time.sleep(0.001)
    run.cluster.restart()  # immediate shutdown, then start on the same port
    if not seen:
        return 0, 0
    tokens = sorted({token for _, token in seen})
    # A token that neither holds a row nor wrote a run was lost with the crash (or released).
    kept = {str(row[0]) for row in run.fetch_superuser(KEPT_SQL, (tokens, tokens))}
    return len(seen), sum(1 for _, token in seen if token not in kept)


def test_claims_lost_in_a_crash_admit_nothing_twice(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Crashing a durable server right after claims loses no occurrence and doubles none."""
    run = scenario("claim crash", "12.3")
    run.prepare(durable=True)
    for _ in range(3):
        run.replica(lease_ms=LEASE_MS)
    run.wait_ready()
    run.add_schedules(6, window_s=WINDOW_S, policy=MisfirePolicy.CATCH_UP)
    seen = lost = 0
    for _ in range(CRASHES):
        time.sleep(2.0)
        claims, gone = _crash_after_claims(run)
        seen += claims
        lost += gone
        run.fault("server immediate shutdown right after claims were visible, then restart")
    run.note(f"{seen} claims visible before the crashes; {lost} neither survived nor were fenced")
    wait_until(lambda: all(r.alive for r in run.replicas), timeout_s=5, what="replicas alive")
    run.wait_exhausted(timeout_s=WINDOW_S + 60)
    outcome = run.finish()
    assert outcome.expected >= 6 * (WINDOW_S - 1)
    assert seen > 0, "no claim was ever visible before a crash: the fault missed its target"
