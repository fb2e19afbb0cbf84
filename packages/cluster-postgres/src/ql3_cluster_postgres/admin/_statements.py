"""The statements of an admin change, each sent on the transaction's connection it is given.

Functions, not methods: they hold no state of their own, only what the transaction passes in,
so `ScheduleAdmin` reads as the order of a change and this module as what each step sends.
Rows are read by name (dict rows): the SQL's column names are the contract, not their order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from ql3_runtime_core import (
    ScheduleDefinition,
    ScheduleState,
    TaskExecution,
    ZoneRules,
)

from ql3_cluster_postgres._send import send

from ._models import (
    ScheduleRecord,
    ScheduleSpec,
)
from ._plan import (
    Update,
    initial_cursor,
    readable_definition,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import psycopg

__all__ = [
    "create_schedules",
    "definition_columns",
    "fetch_records",
    "fetch_rows",
    "latest_decided",
    "open_revisions",
    "read_executions",
    "record_from_row",
    "row_count",
    "set_executions",
    "update_schedules",
]

# Rows are read by name (dict_row): the SQL's column names are the contract, not their order.
_Row = dict[str, Any]

# Revision reasons written for new schedules (see migrations/0004).
_CREATED = "created"


def fetch_rows(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> list[_Row]:
    """Send statement `name` and return its rows as dicts, read by column name."""
    return send(conn, name, params, rows=dict_row).fetchall()


def fetch_records(
    conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]
) -> list[ScheduleRecord]:
    """Run a statement that returns schedule rows (lock, read, create) and read them."""
    return [record_from_row(row) for row in fetch_rows(conn, name, params)]


def row_count(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> int:
    """Send statement `name` and return how many rows it wrote."""
    return send(conn, name, params).rowcount


def create_schedules(
    conn: psycopg.Connection[Any],
    specs: Sequence[ScheduleSpec],
    now: int,
    payloads: Sequence[dict[str, Any]],
    rules: ZoneRules,
) -> list[ScheduleRecord]:
    """Create task, cron trigger and schedule per spec, each with its first revision."""
    if not specs:
        return []
    # Cached per definition and rules: a bulk apply asks the same question many times.
    cursors = [initial_cursor(spec.definition, now, rules=rules) for spec in specs]
    definitions = [spec.definition for spec in specs]
    params = {
        "names": [spec.name for spec in specs],
        "payloads": [Jsonb(payload) for payload in payloads],
        **definition_columns(definitions),
        "cursors": [cursor for cursor, _ in cursors],
        "states": [state.value for _, state in cursors],
    }
    created = fetch_records(conn, "create_schedules", params)
    open_revisions(
        conn, [(record.schedule_id, _CREATED, record.next_due_at_ms) for record in created]
    )
    return created


def read_executions(
    conn: psycopg.Connection[Any], task_ids: Sequence[int] | None
) -> dict[str, TaskExecution]:
    """Read what the given tasks (all when None) execute, by task (= schedule) name."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = send(
            cur, "read_task_executions", {"task_ids": None if task_ids is None else list(task_ids)}
        ).fetchall()
    # Keyed by name: a schedule and its task are created together under one name.
    return {
        row["name"]: TaskExecution(
            command=row["command"],
            max_attempts=row["max_attempts"],
            timeout_ms=row["timeout_ms"],
            retry_backoff_ms=row["retry_backoff_ms"],
            overlap=row["overlap"],
            max_running=row["max_running"],
        )
        for row in rows
    }


def set_executions(
    conn: psycopg.Connection[Any], executions: Sequence[tuple[int, TaskExecution]]
) -> None:
    """Write each (task id, execution) onto its task."""
    if not executions:
        return
    params = {
        "task_ids": [task_id for task_id, _ in executions],
        "commands": [execution.command for _, execution in executions],
        "max_attempts": [execution.max_attempts for _, execution in executions],
        "timeouts_ms": [execution.timeout_ms for _, execution in executions],
        "retry_backoffs_ms": [execution.retry_backoff_ms for _, execution in executions],
        "overlaps": [execution.overlap.value for _, execution in executions],
        "max_runnings": [execution.max_running for _, execution in executions],
    }
    row_count(conn, "set_task_executions", params)


def latest_decided(conn: psycopg.Connection[Any], ids: Sequence[int]) -> dict[int, int]:
    """Return each schedule's latest admitted or skipped occurrence (rows already locked)."""
    if not ids:
        return {}
    rows = fetch_rows(conn, "latest_decided", {"schedule_ids": list(ids)})
    return {int(row["id"]): int(row["latest_ms"]) for row in rows if row["latest_ms"] is not None}


def open_revisions(
    conn: psycopg.Connection[Any], revisions: Sequence[tuple[int, str, int | None]]
) -> None:
    """Open one revision per (schedule id, reason, first cursor), after the row was written."""
    if not revisions:
        return
    params = {
        "schedule_ids": [sid for sid, _, _ in revisions],
        "reasons": [reason for _, reason, _ in revisions],
        "first_cursors": [first for _, _, first in revisions],
    }
    row_count(conn, "open_revisions", params)


def update_schedules(
    conn: psycopg.Connection[Any],
    updates: Sequence[Update],
    old_cursors: Mapping[int, int | None] | None = None,
) -> None:
    """Rewrite rows; close and open a revision for each update that opens one.

    `old_cursors` holds each revising schedule's cursor before the change (where its live
    revision ends).
    """
    if not updates:
        return
    params = {
        "schedule_ids": [update.schedule_id for update in updates],
        **definition_columns([update.definition for update in updates]),
        "cursors": [update.next_due_at_ms for update in updates],
        "states": [update.state.value for update in updates],
        # A state change sends no definition: the statement keeps the stored one, which this
        # node may not even be able to read (a quarantined row).
        "keeps": [update.definition is None for update in updates],
    }
    fetch_rows(conn, "update_schedules", params)
    revising = [update for update in updates if update.revision is not None]
    if not revising:
        return
    # The live revision ends where the cursor stood before this change, not after it.
    ends = old_cursors or {}
    row_count(
        conn,
        "close_revisions",
        {
            "schedule_ids": [update.schedule_id for update in revising],
            "end_cursors": [ends.get(update.schedule_id) for update in revising],
        },
    )
    open_revisions(
        conn,
        [(update.schedule_id, str(update.revision), update.first_cursor_ms) for update in revising],
    )


def definition_columns(
    definitions: Sequence[ScheduleDefinition | None],
) -> dict[str, list[Any]]:
    """Return the definition columns of each row; None (keep the stored one) sends NULLs."""

    def column(read: Callable[[ScheduleDefinition], Any]) -> list[Any]:
        return [None if d is None else read(d) for d in definitions]

    return {
        "crons": column(lambda d: d.cron),
        "timezones": column(lambda d: d.timezone),
        "policies": column(lambda d: d.misfire_policy.value),
        "graces": column(lambda d: d.misfire_grace_ms),
        "starts": column(lambda d: d.start_at_ms),
        "ends": column(lambda d: d.end_at_ms),
    }


def record_from_row(row: _Row) -> ScheduleRecord:
    """Read a schedule row (lock_schedules, read_schedules, create_schedules) by column name."""
    definition, error = readable_definition(row)
    return ScheduleRecord(
        schedule_id=row["id"],
        task_id=row["task_id"],
        name=row["name"],
        definition=definition,
        cron=row["cron"],
        timezone=row["timezone"],
        state=ScheduleState(row["state"]),
        next_due_at_ms=row["next_due_at_ms"],
        claim_owner_id=row["claim_owner_id"],
        claim_expires_at_ms=row["claim_expires_at_ms"],
        version=row["version"],
        updated_at_ms=row["updated_at_ms"],
        created_at_ms=row["created_at_ms"],
        definition_error=error,
        invalid_reason=row["invalid_reason"],
        invalidated_at_ms=row["invalidated_at_ms"],
    )
