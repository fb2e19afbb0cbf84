"""What a schedule's runs execute (DESIGN §10): stored on its task by ScheduleAdmin, bounded twice.

The admin writes it in the transaction that creates or changes the schedule; changing only what
runs leaves the schedule row (cursor, version, revisions) alone. The model and the database
refuse the same out-of-bound values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from pydantic import ValidationError
from ql3_cluster_postgres import ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import (
    COMMAND_MAX_LENGTH,
    MAX_ATTEMPTS_DEFAULT,
    RETRY_BACKOFF_MS_DEFAULT,
    TIMEOUT_MS_DEFAULT,
    ScheduleDefinition,
    TaskExecution,
)
from repo_helpers import fetch, owner_conn

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

HOURLY = ScheduleDefinition(cron="0 * * * *")
BACKUP = TaskExecution(
    command="pg_dump app > /tmp/app.sql", max_attempts=5, timeout_ms=600_000, retry_backoff_ms=0
)


def _row(db: Ql3Database, name: str) -> tuple[object, ...]:
    """Read the schedule row's version and revision count (what an execution change keeps)."""
    ((version, revisions),) = fetch(
        db.dsn("admin"),
        "SELECT s.version, (SELECT count(*) FROM ql3.schedule_revisions AS v"
        " WHERE v.schedule_id = s.id) FROM ql3.trigger_schedules AS s"
        " JOIN ql3.tasks AS t ON t.id = s.task_id WHERE t.name = %s",
        (name,),
    )
    return version, revisions


def test_add_stores_what_runs_on_the_task(ql3_db: Ql3Database) -> None:
    """A command task keeps its command and bounds; a schedule without one is a Python task."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.add_schedule("backup", HOURLY, execution=BACKUP)
        admin.add_schedule("report", HOURLY)
        stored = admin.task_executions()
    assert stored == {"backup": BACKUP, "report": TaskExecution()}
    assert stored["report"] == TaskExecution(
        command=None,
        max_attempts=MAX_ATTEMPTS_DEFAULT,
        timeout_ms=TIMEOUT_MS_DEFAULT,
        retry_backoff_ms=RETRY_BACKOFF_MS_DEFAULT,
    )


def test_apply_changes_what_runs_without_touching_the_schedule(ql3_db: Ql3Database) -> None:
    """Only the execution changed: reported updated, cursor, version and revisions unchanged."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        created = admin.apply_schedules([ScheduleSpec(name="job", definition=HOURLY)])
        before = _row(ql3_db, "job")
        cursor = admin.get_schedule("job").next_due_at_ms
        changed = admin.apply_schedules(
            [ScheduleSpec(name="job", definition=HOURLY, execution=BACKUP)]
        )
        same = admin.apply_schedules(
            [ScheduleSpec(name="job", definition=HOURLY, execution=BACKUP)]
        )
        assert admin.get_schedule("job").next_due_at_ms == cursor
        assert admin.task_executions()["job"] == BACKUP
    assert (created.created, changed.updated, same.unchanged) == (("job",), ("job",), ("job",))
    assert _row(ql3_db, "job") == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", 101),
        ("timeout_ms", 999),
        ("timeout_ms", 86_400_001),
        ("retry_backoff_ms", -1),
        ("retry_backoff_ms", 86_400_001),
        ("command", ""),
        ("command", "   "),
        ("command", "x" * (COMMAND_MAX_LENGTH + 1)),
    ],
)
def test_out_of_bound_executions_are_refused_by_model_and_database(
    ql3_db: Ql3Database, field: str, value: object
) -> None:
    """The model names the field; the database's CHECK refuses the same value written past it."""
    with pytest.raises(ValidationError, match=f"{field}:"):
        TaskExecution.model_validate({field: value})
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.add_schedule("job", HOURLY)
    with (
        owner_conn(ql3_db) as conn,
        pytest.raises(psycopg.errors.CheckViolation, match="tasks_"),
    ):
        conn.execute(
            psycopg.sql.SQL("UPDATE ql3.tasks SET {} = %s WHERE name = 'job'").format(
                psycopg.sql.Identifier(field)
            ),
            (value,),
        )
