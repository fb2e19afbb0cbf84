"""Tables the `ql3` command line prints for people (scripts use `--json`).

Every time shown is a database time (epoch ms from `clock_timestamp()`), rendered in ISO 8601.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ._schedules import format_ms

if TYPE_CHECKING:
    from pydantic import BaseModel
    from ql3_cluster_postgres import ScheduleRecord, StatusReport

__all__ = ["in_ms", "record_json", "records_table", "status_text"]


def record_json(record: BaseModel) -> dict[str, Any]:
    """Return a record as plain JSON values."""
    return record.model_dump(mode="json")


def records_table(records: list[ScheduleRecord]) -> Table:
    """Build the `ql3 schedule list` table; next due in each schedule's own zone.

    A quarantined schedule shows why in the last column (a definition this node cannot read
    shows that too); its times are in UTC when its own zone cannot be loaded.
    """
    table = Table(box=None, pad_edge=False)
    for column in (
        "name", "state", "cron", "tz", "misfire", "grace_ms", "next due", "claimed by", "reason",
    ):  # fmt: skip
        table.add_column(column)
    for record in records:
        definition = record.definition
        zone = "UTC" if definition is None else definition.timezone
        table.add_row(
            record.name,
            str(record.state),
            record.cron,
            record.timezone,
            "-" if definition is None else str(definition.misfire_policy),
            "-" if definition is None else str(definition.misfire_grace_ms),
            format_ms(record.next_due_at_ms, zone),
            record.claim_owner_id or "-",
            escape(record.invalid_reason or record.definition_error or "-"),
        )
    return table


def status_text(report: StatusReport) -> None:
    """Print `ql3 status` for people: the database time, then one row per schedule."""
    console = Console(width=200)
    now = report.database_now_ms
    console.print(
        f"database time {format_ms(now)} ({now}); {len(report.schedules)} schedules,"
        f" {report.claims_held} claims held, next due in {in_ms(report.next_due_in_ms)},"
        f" {report.schedules_overdue} overdue (more than lease {report.lease_ms} ms + grace);"
        f" zone rules tzdata {report.zone_rules_version or 'none recorded'}"
    )
    if report.invalid_schedules:
        console.print(
            f"{report.invalid_schedules} schedule(s) quarantined (state invalid): they admit"
            " nothing until fixed (ql3 schedule apply) or resumed or retired",
            markup=False,
        )
    table = Table(box=None, pad_edge=False)
    for column in (
        "name", "state", "next due (UTC)", "due in", "claimed by", "claim expires in",
        "runs", "last admitted (UTC)", "invalid reason",
    ):  # fmt: skip
        table.add_column(column)
    for item in report.schedules:
        table.add_row(
            item.name,
            f"{item.state} (overdue)" if item.overdue else str(item.state),
            format_ms(item.next_due_at_ms),
            in_ms(item.next_due_in_ms),
            item.claim_owner_id or "-",
            in_ms(item.claim_expires_in_ms),
            str(item.runs_admitted),
            format_ms(item.last_admitted_at_ms),
            escape(item.invalid_reason or "-"),
        )
    console.print(table)


def in_ms(value: int | None) -> str:
    """Render a duration in database milliseconds, '-' for none."""
    return "-" if value is None else f"{value} ms"
