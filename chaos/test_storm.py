"""Serialization storm: 4 replicas, claim batches of 2, many schedules due every second.

The commits run at SERIALIZABLE and retry SQLSTATE 40001 (SPEC §7). The repository is built so
that replicas committing *different* schedules do not conflict (no foreign keys, TID-scan fence),
so replicas alone rarely provoke 40001. The second half of the window therefore adds what makes
storms in production: a concurrent writer on the schedule rows (think of an operator's
maintenance job) that touches rows being committed, so the replicas' commits hit
"could not serialize access due to concurrent update" and must retry. The retries are counted
from the replicas' JSON cycle summaries (`serialization_retries`); the history must stay exact.
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
# `ql3 run` defaults: --max-serialization-retries 8, --retry-initial-ms 200.
MAX_RETRIES = 8
FIRST_RETRY_MS = 200
# Contention slows admission down; it must not starve it. The writer holds a row at most HOLD_S
# and then rests REST_S, so one commit attempt costs at most HOLD_S + REST_S; a commit may meet
# the writer on every one of its 1 + 8 attempts, then fail (a fault: one first retry) and be
# claimed and committed again within a cycle slack.
BOUND = Bound.of(
    (
        f"{MAX_RETRIES + 1} attempts x (hold {HOLD_S:.1f} s + rest {REST_S:.1f} s)",
        round((MAX_RETRIES + 1) * (HOLD_S + REST_S) * 1000),
    ),
    ("fault retry", FIRST_RETRY_MS),
    SLACK,
)
# A no-op update of rows claimed right now: it changes no fenced column, it only holds their row
# locks until a replica's SERIALIZABLE commit waits for them; that commit then fails with 40001.
TOUCH_SQL = (
    "UPDATE ql3.trigger_schedules SET updated_at_ms = updated_at_ms WHERE id IN ("
    "SELECT id FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL"
    " ORDER BY id LIMIT 8 FOR UPDATE SKIP LOCKED)"
)


def _touch_claimed_rows(dsn: str, stop: threading.Event, counts: list[int]) -> None:
    """Until `stop`: lock claimed rows, hold them until a replica's commit waits, then commit.

    counts: [rows touched, replica commits seen blocked behind the writer].
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            touched, blocked = 0, 0
            with conn.transaction():
                touched = max(conn.execute(TOUCH_SQL).rowcount, 0)
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
