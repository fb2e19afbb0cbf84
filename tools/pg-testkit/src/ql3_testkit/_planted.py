"""Histories planted as the schema owner: rows the product writes, placed where a test needs them.

Shared by the packages' tests so that one statement, not a copy per package, says what a manual
Run looks like when planted at the very millisecond of a cron occurrence.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from ._sql import statement

__all__ = ["plant_manual_run_at_cursor"]


def plant_manual_run_at_cursor(owner_dsn: str, schedule_id: int, *, owner_id: str) -> int:
    """Write a manual Run (request `at-the-cursor`) at the schedule's cursor; return that instant.

    `owner_dsn` connects as the schema owner (the runtime and admin roles cannot write a manual
    Run directly); `owner_id` is the login the Run names as its requester.
    """
    with psycopg.connect(owner_dsn, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            statement("plant_manual_run_at_cursor"), {"id": schedule_id, "owner_id": owner_id}
        ).fetchall()
    (row,) = {row["at"] for row in rows}  # both event rows carry the one instant
    return int(row)
