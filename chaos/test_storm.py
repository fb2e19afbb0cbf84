"""Serialization storm: 4 replicas, claim batches of 2, many schedules due every second.

The commits run at SERIALIZABLE and retry SQLSTATE 40001 (DESIGN §5). The repository is built so
that replicas committing *different* schedules do not conflict (no foreign keys, TID-scan fence),
so replicas alone rarely provoke 40001. The second half of the window therefore adds what makes
storms in production: a concurrent writer on the schedule rows (think of an operator's
maintenance job) that touches rows being committed, so the replicas' commits hit
"could not serialize access due to concurrent update" and must retry. The retries are counted
from the replicas' JSON cycle summaries (`serialization_retries`); the history must stay exact.

What a touch costs (measured: max lateness = the lease + 25-100 ms in every run): the writer's
update moves the row to a new tuple, the commit's TID fence (the ctid remembered from the claim,
also on retry) no longer finds it, so the commit ends `raced` and the occurrence waits until the
claim expires and another replica takes it. The writer touches each (schedule, cursor) at most
once, so no occurrence pays that twice.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import psycopg
from harness import SLACK, Bound, pause

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 3_000
REPLICAS = 4
SCHEDULES = 40
WINDOW_S = 12
CALM_S = 4
HOLD_S = 0.5
REST_S = 0.2
BLOCKED_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
)
# Contention slows admission down; it must not starve it. An occurrence is claimed within a
# cycle slack; if the writer touched its row, its holder's commit is raced (see above) and the
# claim expires after the lease; the next holder (never touched again) claims and commits it
# within a cycle slack. A commit the writer only delays (hold <= 0.5 s, then 40001 and an
# immediate retry) lands well inside the lease.
BOUND = Bound.of(("first claim: cycle slack", SLACK[1]), ("raced holder: lease", LEASE_MS), SLACK)
# A no-op update of rows claimed right now (each (schedule, cursor) once): it changes no fenced
# column, it only holds their row locks until a replica's SERIALIZABLE commit waits for them;
# that commit then fails with 40001.
TOUCH_SQL = (
    "UPDATE ql3.trigger_schedules SET updated_at_ms = updated_at_ms WHERE id IN ("
    "SELECT id FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL"
    " AND (id, next_due_at_ms) NOT IN (SELECT * FROM unnest(%s::bigint[], %s::bigint[]))"
    " ORDER BY id LIMIT 8 FOR UPDATE SKIP LOCKED) RETURNING id, next_due_at_ms"
)


def _touch_claimed_rows(dsn: str, stop: threading.Event, counts: list[int]) -> None:
    """Until `stop`: lock claimed rows, hold them until a replica's commit waits, then commit.

    counts: [rows touched, replica commits seen blocked behind the writer].
    """
    done: set[tuple[int, int]] = set()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            touched, blocked = 0, 0
            with conn.transaction():
                ids, cursors = [i for i, _ in done], [c for _, c in done]
                rows = conn.execute(TOUCH_SQL, (ids, cursors)).fetchall()
                done.update((int(r[0]), int(r[1])) for r in rows)
                touched = len(rows)
                deadline = time.monotonic() + HOLD_S
                while touched and not blocked and time.monotonic() < deadline:
                    row = conn.execute(BLOCKED_SQL).fetchone()
                    blocked = int(row[0]) if row else 0
            counts[0] += touched
            counts[1] += blocked
            # Rest after a hit so the replicas always make progress; poll fast otherwise.
            stop.wait(REST_S if touched else 0.002)


def test_serialization_storm_keeps_history_exact(scenario: Callable[[str, str], Scenario]) -> None:
    """40001 retries happen under contention, are counted, and nothing is lost or doubled."""
    run = scenario("serialization-storm", "7")
    run.prepare()
    for _ in range(REPLICAS):
        run.replica(lease_ms=LEASE_MS, claim_batch=2, poll_interval_ms=100)
    run.wait_ready()
    run.add_schedules(SCHEDULES, window_s=WINDOW_S)
    run.fault(f"{REPLICAS} replicas, claim batch 2, {SCHEDULES} schedules due every second")
    pause(CALM_S)
    calm = run.retries_40001()
    stop = threading.Event()
    counts = [0, 0]
    writer = threading.Thread(
        target=_touch_claimed_rows, args=(run.database.superuser_dsn, stop, counts), daemon=True
    )
    writer.start()
    run.on_close(stop.set)
    run.fault("a concurrent writer holding the rows being committed")
    try:
        run.wait_exhausted(timeout_s=WINDOW_S + 30)
    finally:
        stop.set()
        writer.join(10)
    # Check the fault took effect: the writer really held rows that replicas were committing.
    assert counts[1] > 0, "no replica commit ever waited behind the storm writer"
    run.note(f"{calm} retries from replicas alone in the first {CALM_S} s")
    run.note(f"writer touched {counts[0]} claimed rows; {counts[1]} replica commits blocked on it")
    retries = run.retries_40001()
    per_replica = {r.owner_id: r.serialization_retries() for r in run.replicas}
    run.note("40001 retries per replica: " + ", ".join(f"{k}={v}" for k, v in per_replica.items()))
    run.finish(bound=BOUND)
    assert retries > 0, f"no 40001 retry under the storm\n{run.logs()}"
