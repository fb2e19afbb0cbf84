"""The migration tests' copies of the shipped files, cut back to an earlier schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from pathlib import Path


def keep_up_to(source: Path, version: int) -> None:
    """Cut the copy `source` back to schema `version`: delete every later migration file.

    Every later file goes, not only the next one: a later migration may read what an earlier
    one it follows adds, so a copy holding a gap would not apply.
    """
    for path in source.glob("*.sql"):
        if int(path.name[:4]) > version:
            path.unlink()


def seed_minute_schedule(owner_dsn: str, run: tuple[str, int] | None = None) -> None:
    """Write, as an old build did, task `old` with one schedule every minute (cursor 120 s).

    `run` = (owner_id, created_at_ms) also writes one cron Run of the occurrence at 60 s: the
    columns every schema since the first has, so the same rows serve any starting schema.
    """
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('old', 1)")
        conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1)")
        conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
            " updated_at_ms, created_at_ms) VALUES (1, 1, '* * * * *', 120000, 1, 1)"
        )
        if run is not None:
            conn.execute(
                "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
                " claim_token, created_at_ms) VALUES (1, 1, 60000, %s, gen_random_uuid(), %s)",
                run,
            )
