"""The bare-SQL baseline worker: the fewest statements that do QL3's claim + fenced commit.

It does the same work as a QL3 replica with default settings (DESIGN §14: an equal-work baseline):
cycles of at most BUDGET (QL3's cycle budget, 256) occurrences; per round one claim statement
(READ COMMITTED, `FOR UPDATE SKIP LOCKED`, at most min(BATCH, budget left) due schedules, BATCH
being QL3's default claim batch, 128, in `(next_due_at_ms, id)` order, one
`clock_timestamp()`, committed without waiting for the WAL flush like QL3's claim; after a round
whose backlogs starved claimed rows it claims only as many as were served, as QL3 does), then one
SERIALIZABLE transaction holding a single statement that fences
every claimed row on owner, token and expiry by one database observation, admits every due
occurrence of those rows oldest first up to the budget left (the crons have a fixed period, so
no cron parsing), moves the cursors, clears the claims and writes 1 run, 1 attempt and 2 events
per occurrence. Its sessions carry QL3's session settings (`enable_seqscan=off`,
`plan_cache_mode=force_generic_plan`). No validation, no pydantic, no decision layer, no
NOTIFY. SQLSTATE 40001 is retried and counted. It runs as its own OS process (`python -m bench
baseline-worker`), like a replica, and connects as the runtime login user.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from typing import TYPE_CHECKING

import psycopg
from psycopg import IsolationLevel
from ql3_cluster_control import CoordinatorSettings

from ._sql import connect, load_sql

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["run_baseline_worker"]

# QL3's defaults, read from its settings model so the two never drift apart.
BATCH: int = CoordinatorSettings.model_fields["claim_batch"].default
BUDGET: int = CoordinatorSettings.model_fields["cycle_budget"].default
# The QL3 repository's session settings (cluster-postgres `_SESSION_SETTINGS`), so both sides
# plan their statements the same way.
SESSION_OPTIONS = "-c enable_seqscan=off -c plan_cache_mode=force_generic_plan"
LEASE_MS = 30_000
IDLE_SLEEP_S = 0.005


class _Stop:
    """Set by SIGTERM/SIGINT; the loop ends after the round in progress."""

    requested = False

    @classmethod
    def handle(cls, _signum: int, _frame: FrameType | None) -> None:
        cls.requested = True


def run_baseline_worker(dsn: str, owner: str, max_seconds: float, period_ms: int) -> None:
    """Claim and commit until stopped (SIGTERM) or `max_seconds` pass; print a JSON summary."""
    signal.signal(signal.SIGTERM, _Stop.handle)
    signal.signal(signal.SIGINT, _Stop.handle)
    claim_sql, commit_sql = load_sql("baseline_claim"), load_sql("baseline_commit")
    rounds = commits = retries = 0
    remaining = BUDGET
    round_size = BATCH
    deadline = time.monotonic() + max_seconds
    with connect(dsn, application_name=owner, options=SESSION_OPTIONS) as conn:
        conn.isolation_level = IsolationLevel.SERIALIZABLE  # applies to transaction() blocks
        while not _Stop.requested and time.monotonic() < deadline:
            token = uuid.uuid4()
            batch = min(round_size, remaining)
            params = {"owner": owner, "token": token, "batch": batch, "lease_ms": LEASE_MS}
            ids = [row["id"] for row in conn.execute(claim_sql, params).fetchall()]
            rounds += 1
            if not ids:
                remaining = BUDGET  # the cycle ends when nothing is due, as QL3's does
                time.sleep(IDLE_SLEEP_S)
                continue
            commit_params = {
                "ids": ids,
                "owner": owner,
                "token": token,
                "budget": remaining,
                "period_ms": period_ms,
            }
            while True:
                try:
                    with conn.transaction():
                        row = conn.execute(commit_sql, commit_params).fetchone()
                    break
                except psycopg.errors.SerializationFailure:
                    retries += 1
            commits += 1
            remaining -= int(row["admitted"]) if row else 0
            served = int(row["served"]) if row else 0
            round_size = _next_round_size(round_size, len(ids), served, remaining)
            if remaining <= 0:
                remaining = BUDGET  # budget spent: the next round starts a new cycle
    summary = {"rounds": rounds, "commits": commits, "serialization_retries": retries}
    print(json.dumps({"event": "baseline.summary", **summary}), flush=True)


def _next_round_size(current: int, claimed: int, served: int, remaining: int) -> int:
    """QL3's rule (Coordinator._next_round_size): fewer claims while backlogs starve some."""
    if served < claimed:
        return max(1, served)
    return current if remaining <= 0 else BATCH
