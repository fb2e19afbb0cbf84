"""Upgrading to schema 16: the take's body is replaced, its decisions are not.

A schema 15 database holds three queued attempts written as the old build wrote them: two of a
task capped at one running attempt, one of a task without a cap. After the upgrade the new take
starts the capped task's oldest, then leaves its second waiting (the cap is full: the capped
schedules' hint is still read when a task has a cap) and starts the uncapped one (the default
policy's path, now updated through a primary-key join). The migration changes no row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
from migration_files import keep_up_to
from ql3_cluster_postgres import WorkerIngress, migrate, record_zone_rules
from repo_helpers import fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database

_ATTEMPTS = "SELECT id, run_id, state FROM ql3.attempts ORDER BY id"


def _seed_schema_15(owner_dsn: str) -> None:
    """Task 1 `capped` (cap 1, two queued Runs) and task 2 `free` (one queued Run), commands."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO ql3.tasks (name, created_at_ms, command, max_running)"
            " VALUES ('capped', 1, 'true', 1), ('free', 1, 'true', NULL)"
        )
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1), (2, 1)")
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
            " updated_at_ms, created_at_ms)"
            " VALUES (1, 1, '* * * * *', 240000, 1, 1), (2, 2, '* * * * *', 240000, 1, 1)"
        )
        conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (1, 1, 60000, 'old', gen_random_uuid(), 60005),"
            " (1, 1, 120000, 'old', gen_random_uuid(), 120005),"
            " (2, 2, 180000, 'old', gen_random_uuid(), 180005)"
        )
        conn.execute(
            "INSERT INTO ql3.attempts (run_id, state, created_at_ms, updated_at_ms)"
            " VALUES (1, 'queued', 60005, 60005), (2, 'queued', 120005, 120005),"
            " (3, 'queued', 180005, 180005)"
        )


def test_upgrade_to_16_keeps_the_take_decisions(bare_db: Ql3Database, source: Path) -> None:
    """The cap still holds back a capped Run; the uncapped one is taken; no row changed."""
    keep_up_to(source, 15)
    migrate(bare_db.dsn("owner"), source=source)
    _seed_schema_15(bare_db.dsn("owner"))
    before = fetch(bare_db.dsn("owner"), _ATTEMPTS)
    assert migrate(bare_db.dsn("owner"))[0] == "0016_take_plans.sql"
    assert fetch(bare_db.dsn("owner"), _ATTEMPTS) == before
    record_zone_rules(bare_db.dsn("owner"))
    with WorkerIngress(bare_db.dsn("worker_ingress")) as ingress:
        first = ingress.take_attempts(
            worker_id="w", lease_token=uuid4(), lease_ms=60_000, limit=1, commands=True
        )
        rest = ingress.take_attempts(
            worker_id="w", lease_token=uuid4(), lease_ms=60_000, limit=10, commands=True
        )
    assert [a.run_id for a in first] == [1]
    assert [a.run_id for a in rest] == [3]
    assert fetch(bare_db.dsn("owner"), _ATTEMPTS) == [
        (1, 1, "running"),
        (2, 2, "queued"),
        (3, 3, "running"),
    ]
