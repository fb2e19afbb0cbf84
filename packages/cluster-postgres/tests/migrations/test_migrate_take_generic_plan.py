"""Upgrading to schema 17: the take is planned once per session; what it takes is unchanged.

A schema 16 database holds two queued attempts written as the old build wrote them. The
migration changes no row and only the take's settings: it keeps `enable_sort = off` and gains
`plan_cache_mode = force_generic_plan`. A take after the upgrade, repeated past the calls after
which PostgreSQL would consider a generic plan on its own, still takes them oldest first.
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
_SETTINGS = (
    "SELECT p.proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
    " WHERE n.nspname = 'ql3' AND p.proname = 'worker_take_attempts_v2'"
)


def _seed_schema_16(owner_dsn: str) -> None:
    """Task `free` (no cap, a command) with two queued Runs, the older one second by id."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO ql3.tasks (name, created_at_ms, command) VALUES ('free', 1, 'true')"
        )
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1)")
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
            " updated_at_ms, created_at_ms) VALUES (1, 1, '* * * * *', 240000, 1, 1)"
        )
        conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (1, 1, 120000, 'old', gen_random_uuid(), 120005),"
            " (1, 1, 60000, 'old', gen_random_uuid(), 60005)"
        )
        conn.execute(
            "INSERT INTO ql3.attempts (run_id, state, created_at_ms, updated_at_ms)"
            " VALUES (1, 'queued', 120005, 120005), (2, 'queued', 60005, 60005)"
        )


def test_upgrade_to_17_plans_the_take_once_and_keeps_its_order(
    bare_db: Ql3Database, source: Path
) -> None:
    """Only the take's settings change; taken one at a time, the older attempt comes first."""
    keep_up_to(source, 16)
    migrate(bare_db.dsn("owner"), source=source)
    _seed_schema_16(bare_db.dsn("owner"))
    before = fetch(bare_db.dsn("owner"), _ATTEMPTS)
    assert fetch(bare_db.dsn("owner"), _SETTINGS) == [
        (["search_path=pg_catalog, ql3, pg_temp", "enable_sort=off"],)
    ]
    assert migrate(bare_db.dsn("owner")) == ["0017_take_generic_plan.sql"]
    assert fetch(bare_db.dsn("owner"), _ATTEMPTS) == before
    ((settings,),) = fetch(bare_db.dsn("owner"), _SETTINGS)
    assert "enable_sort=off" in settings
    assert "plan_cache_mode=force_generic_plan" in settings
    record_zone_rules(bare_db.dsn("owner"))
    taken: list[int] = []
    with WorkerIngress(bare_db.dsn("worker_ingress"), max_connections=1) as ingress:
        # Empty takes first: more than the five custom plans PostgreSQL tries before it may
        # switch, so the takes that find work run the plan cached for the session.
        for _ in range(7):
            assert (
                ingress.take_attempts(
                    worker_id="w", lease_token=uuid4(), lease_ms=60_000, limit=1, commands=False
                )
                == []
            )
        for _ in range(3):
            taken += [
                a.run_id
                for a in ingress.take_attempts(
                    worker_id="w", lease_token=uuid4(), lease_ms=60_000, limit=1, commands=True
                )
            ]
    assert taken == [2, 1]
    assert fetch(bare_db.dsn("owner"), _ATTEMPTS) == [(1, 1, "running"), (2, 2, "running")]
