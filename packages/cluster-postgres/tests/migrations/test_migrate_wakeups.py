"""Upgrading to schema 15: attempts queued after the upgrade wake listening workers.

A worker may already LISTEN while the database is still at schema 14 (LISTEN needs no schema):
nothing is notified then, and from the upgrade on every transaction that queues attempts
notifies `ql3_attempt_queued` once. No role may call the trigger's function directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from migration_files import keep_up_to, seed_minute_schedule
from ql3_cluster_postgres import AttemptWakeups, migrate

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database

_QUEUE_FIRST_ATTEMPT = (
    "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)"
    " SELECT id, 1, 'queued', created_at_ms, created_at_ms FROM ql3.runs WHERE %s"
)


def _count(wakeups: AttemptWakeups) -> int:
    count = 0
    while wakeups.wait(0.5):
        count += 1
    return count


def test_attempts_queued_after_the_upgrade_notify_once(bare_db: Ql3Database, source: Path) -> None:
    """Schema 14 notifies nothing; after 0015, one notification per queuing transaction."""
    keep_up_to(source, 14)
    migrate(bare_db.dsn("owner"), source=source)
    seed_minute_schedule(bare_db.dsn("owner"), run=("old-replica", 60_250))
    with (
        AttemptWakeups(bare_db.dsn("worker_ingress")) as wakeups,
        psycopg.connect(bare_db.dsn("owner"), autocommit=True) as owner,
    ):
        assert wakeups.wait(0.0) is True  # connected
        owner.execute(_QUEUE_FIRST_ATTEMPT, (False,))
        assert _count(wakeups) == 0
        assert migrate(bare_db.dsn("owner"))[0] == "0015_attempt_wakeups.sql"
        owner.execute(_QUEUE_FIRST_ATTEMPT, (True,))
        assert _count(wakeups) == 1
    for role in ("admin", "runtime", "worker_ingress", "observer"):
        with (
            psycopg.connect(bare_db.dsn(role), autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT ql3.notify_attempt_queued_v1()")
