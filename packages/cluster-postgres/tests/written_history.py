"""A history written row by row as the superuser, for the verify tests to break one rule at a time.

Each test builds exactly the broken history a rule exists for, including ones the schema's
constraints would refuse (those tests drop the constraint first, as a broken build would), so the
rows go in directly rather than through the repository. Each schedule gets the revision 1 the
admin writes with it (migrations/0004). Loaded as a pytest plugin by conftest.py (the `history`
fixture).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from ql3_runtime_core import next_occurrence_ms
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database

__all__ = ["SECOND", "History", "clean_schedule", "history", "whole_second"]

SECOND = 1_000


@dataclass
class History:
    """Writes tasks, schedules and runs straight into a QL3 database, as the superuser."""

    conn: psycopg.Connection[Any]
    admin_dsn: str
    names: list[str] = field(default_factory=list)

    def now_ms(self) -> int:
        """Read the database clock."""
        row = self.conn.execute(
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()
        assert row is not None
        return int(row[0])

    def schedule(
        self,
        *,
        created_at_ms: int,
        next_due_at_ms: int | None,
        cron: str = "* * * * * *",
        policy: str = "catch_up",
        grace_ms: int = 60_000,
        state: str = "active",
        updated_at_ms: int | None = None,
        end_at_ms: int | None = None,
        first_cursor_ms: int | None = None,
    ) -> tuple[int, int]:
        """Insert a task, trigger, schedule and its revision 1; return (schedule id, task id).

        The revision starts at `first_cursor_ms` (default: the first occurrence after creation),
        placed after a clock read no later than the creation, as the admin records it.
        """
        name = f"task-{len(self.names)}-{uuid.uuid4().hex[:6]}"
        self.names.append(name)
        row = self.conn.execute(
            "INSERT INTO ql3.tasks (name, created_at_ms) VALUES (%s, %s) RETURNING id",
            (name, created_at_ms),
        ).fetchone()
        assert row is not None
        task_id = int(row[0])
        row = self.conn.execute(
            "INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (%s, %s) RETURNING id",
            (task_id, created_at_ms),
        ).fetchone()
        assert row is not None
        row = self.conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " misfire_grace_ms, state, next_due_at_ms, end_at_ms, updated_at_ms, created_at_ms)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                row[0],
                task_id,
                cron,
                policy,
                grace_ms,
                state,
                next_due_at_ms,
                end_at_ms,
                updated_at_ms if updated_at_ms is not None else created_at_ms,
                created_at_ms,
            ),
        ).fetchone()
        assert row is not None
        schedule_id = int(row[0])
        first = first_cursor_ms
        if first is None:
            first = next_occurrence_ms(cron, "UTC", created_at_ms)
        self.conn.execute(
            "INSERT INTO ql3.schedule_revisions (schedule_id, revision, reason, cron, timezone,"
            " misfire_policy, misfire_grace_ms, end_at_ms, first_cursor_ms, placed_after_ms,"
            " created_at_ms) VALUES (%s, 1, 'created', %s, 'UTC', %s, %s, %s, %s, %s, %s)",
            (
                schedule_id,
                cron,
                policy,
                grace_ms,
                end_at_ms,
                first,
                min(created_at_ms, first - 1),
                created_at_ms,
            ),
        )
        return schedule_id, task_id

    def skip(
        self,
        schedule: tuple[int, int],
        first_ms: int,
        last_ms: int,
        count: int,
        *,
        acquired_at_ms: int,
        policy: str = "skip",
    ) -> None:
        """Insert a skip record as a commit by a claim acquired at `acquired_at_ms` writes it."""
        self.conn.execute(
            "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms,"
            " last_skipped_ms, skipped_count, misfire_policy, claim_acquired_at_ms, owner_id,"
            " claim_token, created_at_ms) VALUES (%s, %s, %s, %s, %s, %s, 'test', %s, %s)",
            (
                schedule[0],
                first_ms,
                last_ms,
                count,
                policy,
                acquired_at_ms,
                uuid.uuid4(),
                acquired_at_ms + 5,
            ),
        )

    def run(
        self,
        schedule: tuple[int, int],
        scheduled_for_ms: int,
        created_at_ms: int,
        *,
        attempts: int = 1,
        events: tuple[str, ...] = ("run.admitted", "attempt.queued"),
    ) -> int:
        """Insert a run with its attempts and events; return the run id."""
        schedule_id, task_id = schedule
        row = self.conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (%s, %s, %s, 'test', %s, %s) RETURNING id",
            (schedule_id, task_id, scheduled_for_ms, uuid.uuid4(), created_at_ms),
        ).fetchone()
        assert row is not None
        run_id = int(row[0])
        attempt_id = None
        for number in range(1, attempts + 1):
            # At most one live attempt per run (the database's index): earlier ones have ended.
            row = self.conn.execute(
                "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms,"
                " updated_at_ms) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (
                    run_id,
                    number,
                    "queued" if number == attempts else "failed",
                    created_at_ms,
                    created_at_ms,
                ),
            ).fetchone()
            assert row is not None
            attempt_id = int(row[0])
        for kind in events:
            self.conn.execute(
                "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
                " VALUES (%s, %s, %s, %s)",
                (run_id, attempt_id, kind, created_at_ms),
            )
        # The commit also writes its time on the schedule row (DESIGN §5).
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET updated_at_ms = greatest(updated_at_ms, %s)"
            " WHERE id = %s",
            (created_at_ms, schedule_id),
        )
        return run_id

    def move_cursor(self, schedule: tuple[int, int], next_due_at_ms: int) -> None:
        """Set the schedule's cursor, as if a commit had moved it."""
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = %s WHERE id = %s",
            (next_due_at_ms, schedule[0]),
        )

    def forget_run(self, schedule: tuple[int, int], scheduled_for_ms: int) -> None:
        """Delete one occurrence's run with its attempts and events (a lost admission)."""
        occurrence = (schedule[0], scheduled_for_ms)
        self.conn.execute(
            "DELETE FROM ql3.events WHERE run_id IN"
            " (SELECT id FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s)",
            occurrence,
        )
        self.conn.execute(
            "DELETE FROM ql3.attempts WHERE run_id IN"
            " (SELECT id FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s)",
            occurrence,
        )
        self.conn.execute(
            "DELETE FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s", occurrence
        )

    def claim(
        self, schedule: tuple[int, int], owner: str, *, acquired_at_ms: int, expires_at_ms: int
    ) -> None:
        """Leave a claim by `owner` on the schedule row, as a replica that never committed."""
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET claim_owner_id = %s, claim_token = %s,"
            " updated_at_ms = %s, claim_expires_at_ms = %s WHERE id = %s",
            (owner, uuid.uuid4(), acquired_at_ms, expires_at_ms, schedule[0]),
        )

    def verify(self, **options: Any) -> VerifyReport:
        """Run the checker as the ql3_admin login (and the reference: the same verdict)."""
        return checked_verify(self.admin_dsn, **options)


@pytest.fixture
def history(ql3_db: Ql3Database) -> Iterator[History]:
    """Give each test a fresh QL3 database, written by the superuser, checked as ql3_admin."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        yield History(conn, ql3_db.dsn("admin"))


def whole_second(ms: int) -> int:
    """Round down to a whole second (an occurrence of the every-second cron)."""
    return ms - ms % SECOND


def clean_schedule(history: History, count: int = 5) -> tuple[tuple[int, int], int, int]:
    """Write a schedule created 30 s ago with `count` on-time runs.

    Returns (schedule, first occurrence, cursor).
    """
    now = history.now_ms()
    created = whole_second(now) - 30 * SECOND + 500
    first = whole_second(created) + SECOND
    cursor = first + count * SECOND
    schedule = history.schedule(created_at_ms=created, next_due_at_ms=cursor)
    for index in range(count):
        history.run(schedule, first + index * SECOND, first + index * SECOND + 7)
    return schedule, first, cursor
