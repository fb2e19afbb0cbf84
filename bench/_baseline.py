"""The bare-SQL baseline worker: the fewest statements that do QL3's claim + fenced commit.

One round is one claim statement (READ COMMITTED, `FOR UPDATE SKIP LOCKED`, at most 16 due
schedules, one `clock_timestamp()`), then one SERIALIZABLE transaction holding a single statement
that fences every claimed row on owner, token and expiry by one database observation, admits one
occurrence per row (cursor + 1000 ms: the schedules fire every second, so no cron parsing), clears
the claim and writes 1 run, 1 attempt and 2 events per occurrence. No validation, no pydantic, no
decision layer, no NOTIFY. SQLSTATE 40001 is retried and counted. It runs as its own OS process
(`python -m bench baseline-worker`), like a replica, and connects as the runtime login user.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from typing import TYPE_CHECKING

import psycopg
from psycopg import IsolationLevel

from ._sql import connect, load_sql

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["run_baseline_worker"]

BATCH = 16
LEASE_MS = 30_000
IDLE_SLEEP_S = 0.005


class _Stop:
    """Set by SIGTERM/SIGINT; the loop ends after the round in progress."""

    requested = False

    @classmethod
    def handle(cls, _signum: int, _frame: FrameType | None) -> None:
        cls.requested = True


def run_baseline_worker(dsn: str, owner: str, max_seconds: float) -> None:
    """Claim and commit until stopped (SIGTERM) or `max_seconds` pass; print a JSON summary."""
    signal.signal(signal.SIGTERM, _Stop.handle)
    signal.signal(signal.SIGINT, _Stop.handle)
    claim_sql, commit_sql = load_sql("baseline_claim"), load_sql("baseline_commit")
    rounds = admitted_rounds = retries = 0
    deadline = time.monotonic() + max_seconds
    with connect(dsn, application_name=owner) as conn:
        conn.isolation_level = IsolationLevel.SERIALIZABLE  # applies to transaction() blocks
        while not _Stop.requested and time.monotonic() < deadline:
            token = uuid.uuid4()
            params = {"owner": owner, "token": token, "batch": BATCH, "lease_ms": LEASE_MS}
            ids = [row["id"] for row in conn.execute(claim_sql, params).fetchall()]
            rounds += 1
            if not ids:
                time.sleep(IDLE_SLEEP_S)
                continue
            while True:
                try:
                    with conn.transaction():
                        conn.execute(commit_sql, {"ids": ids, "owner": owner, "token": token})
                    break
                except psycopg.errors.SerializationFailure:
                    retries += 1
            admitted_rounds += 1
    summary = {"rounds": rounds, "commits": admitted_rounds, "serialization_retries": retries}
    print(json.dumps({"event": "baseline.summary", **summary}), flush=True)
