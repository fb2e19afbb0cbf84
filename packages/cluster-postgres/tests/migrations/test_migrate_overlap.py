"""Upgrading to schema 9 (the overlap policy): every task keeps today's behaviour.

A schema 8 database with a task and a queued attempt is migrated: the task reads `allow` without
a cap, the queued attempt is taken through the new take like before, and the old take is no
longer the worker role's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
import pytest
from migration_files import keep_up_to
from ql3_cluster_postgres import WorkerIngress, migrate, record_zone_rules
from repo_helpers import fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def test_upgrade_to_overlap_keeps_every_task_allowed_without_a_cap(
    bare_db: Ql3Database, source: Path
) -> None:
    """Tasks of schema 8 are allow/no cap; their queued attempt is taken as before."""
    keep_up_to(source, 8)
    migrate(bare_db.dsn("owner"), source=source)
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO ql3.tasks (name, created_at_ms, command) VALUES ('old', 1, 'true')"
        )
        conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (1, 1, 60000, 'old', gen_random_uuid(), 60005)"
        )
        conn.execute(
            "INSERT INTO ql3.attempts (run_id, state, created_at_ms, updated_at_ms)"
            " VALUES (1, 'queued', 60005, 60005)"
        )
    migrate(bare_db.dsn("owner"))
    record_zone_rules(bare_db.dsn("owner"))
    assert fetch(bare_db.dsn("admin"), "SELECT overlap, max_running FROM ql3.tasks") == [
        ("allow", None)
    ]
    with WorkerIngress(bare_db.dsn("worker_ingress")) as ingress:
        (taken,) = ingress.take_attempts(
            worker_id="w", lease_token=uuid4(), lease_ms=5_000, limit=10
        )
    assert (taken.run_id, taken.attempt_number) == (1, 1)
    with (
        psycopg.connect(bare_db.dsn("worker_ingress"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(
            "SELECT * FROM ql3.worker_take_attempts_v1('w', gen_random_uuid(), 5000, 1, '{}', true)"
        )
