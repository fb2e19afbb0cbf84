"""SIGKILL of replicas mid-cycle, every 2 s: takeover by database time, nothing lost or doubled."""

from __future__ import annotations

import random
import signal
import time
from typing import TYPE_CHECKING

import psycopg
from harness import pause

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
KILL_EVERY_S = 2.0
KILL_FOR_S = 24.0
REPLICAS = 4
MIN_KILLS = 10
CLAIM_HUNT_S = 1.0
# The hunt kills claim holders every 2 s with a 2 s lease, so one occurrence may lose two holders
# in a row; each loss costs at most lease + a poll + a cycle. Lateness is bounded, not minimal.
LATENESS_BOUND_MS = LEASE_MS + 20_000
CLAIMS_SQL = (
    "SELECT id, claim_owner_id, claim_expires_at_ms, next_due_at_ms"
    " FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL"
)


def _hunt_claim_holder(
    conn: psycopg.Connection[tuple[int, str, int, int]], alive: dict[str, Replica]
) -> tuple[Replica, list[tuple[int, str, int, int]]] | None:
    """Poll the claims for up to CLAIM_HUNT_S; return a live holder and its claims, if seen."""
    deadline = time.monotonic() + CLAIM_HUNT_S
    while time.monotonic() < deadline:
        rows = conn.execute(CLAIMS_SQL).fetchall()
        for row in rows:
            if row[1] in alive:
                return alive[row[1]], [r for r in rows if r[1] == row[1]]
        time.sleep(0.002)
    return None


def test_repeated_sigkill_loses_and_doubles_nothing(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Killing a replica every 2 s, preferably one holding a claim, keeps the history exact."""
    run = scenario("sigkill-replicas", "4, 7")
    run.prepare()
    for _ in range(REPLICAS):
        run.replica(lease_ms=LEASE_MS, claim_batch=2)
    run.wait_ready()
    run.add_schedules(4, window_s=KILL_FOR_S + 4)
    chooser = random.Random(20261203)  # noqa: S311 - reproducible victim choice, not security
    kills, mid_cycle = 0, 0
    orphaned: list[tuple[str, int, int, int]] = []  # (victim, schedule, expiry, occurrence)
    victim: Replica
    deadline = time.monotonic() + KILL_FOR_S
    with psycopg.connect(run.dsn("admin"), autocommit=True) as conn:
        while time.monotonic() < deadline:
            pause(KILL_EVERY_S - CLAIM_HUNT_S)
            alive = {r.owner_id: r for r in run.replicas if r.alive}
            hunted = _hunt_claim_holder(conn, alive)
            if hunted is None:
                victim = chooser.choice(list(alive.values()))
            else:
                victim, claims = hunted
                mid_cycle += 1
                orphaned += [(victim.owner_id, c[0], c[2], c[3]) for c in claims]
            # Check the fault took effect: the process died of SIGKILL, not of anything else.
            assert victim.kill() == -signal.SIGKILL, victim.tail()
            kills += 1
            run.replica(lease_ms=LEASE_MS, claim_batch=2)  # heal: the pool is full again
    run.fault(
        f"SIGKILL every {KILL_EVERY_S:.0f} s for {KILL_FOR_S:.0f} s"
        " (a replica seen holding a claim when possible, else a random one)"
    )
    run.note(f"{kills} kills, {mid_cycle} while holding a claim")
    run.wait_exhausted(timeout_s=30)  # healed: survivors and newcomers finish the window
    outcome = run.finish(lateness_bound_ms=LATENESS_BOUND_MS)
    run.note(f"max lateness {outcome.max_lateness_ms} ms (bound lease + 20 s)")
    # Takeover only after expiry by database time: an occurrence whose claim died with its
    # holder was admitted either by that holder (it committed just before the kill) or by
    # another replica no earlier than the dead claim's expiry.
    taken_over = 0
    for holder, schedule_id, expires, occurrence in orphaned:
        rows = run.fetch_admin(
            "SELECT owner_id, created_at_ms FROM ql3.runs"
            " WHERE schedule_id = %s AND scheduled_for_ms = %s",
            (schedule_id, occurrence),
        )
        assert len(rows) == 1, (schedule_id, occurrence, rows)
        admitter, created = rows[0]
        if admitter != holder:
            taken_over += 1
            assert created >= expires, (
                f"occurrence {occurrence} of schedule {schedule_id} admitted at {created} by"
                f" {admitter}, before the dead claim of {holder} expired at {expires}"
            )
    run.note(f"{taken_over} occurrences taken over after their dead claim expired")
    assert kills >= MIN_KILLS
    assert mid_cycle >= 1, "no kill caught a replica holding a claim"
