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

__all__ = ["cell", "in_ms", "print_table", "record_json", "records_table", "status_text"]

# Wide enough for the longest row the database allows (name 200, cron 1 000, reason 2 000
# characters): a table never wraps a cell, so each schedule stays one line for grep and awk.
# Rich sizes a table to its content, so short tables stay short.
_UNWRAPPED_WIDTH = 10_000


def _console() -> Console:
    return Console(width=_UNWRAPPED_WIDTH)


def print_table(table: Table) -> None:
    """Print a table to stdout, one line per row whatever the terminal's width."""
    _console().print(table)


def cell(text: str) -> str:
    r"""Return stored text safe for one table cell: escapes shown, rich markup not interpreted.

    New names are printable (ScheduleSpec refuses the rest), but a row written before that rule,
    or by hand, may hold a tab, a newline or a BEL; shown raw they would break the table or ring
    the terminal, so each such character is shown as its Python escape (`\t`, `\x07`). A `[`
    would start rich markup (`[red]`, or `[/]`, which raises): escaped too.
    """
    if not text.isprintable():
        text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return escape(text)


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
            cell(record.name),
            str(record.state),
            cell(record.cron),
            cell(record.timezone),
            "-" if definition is None else str(definition.misfire_policy),
            "-" if definition is None else str(definition.misfire_grace_ms),
            format_ms(record.next_due_at_ms, zone),
            cell(record.claim_owner_id or "-"),
            cell(record.invalid_reason or record.definition_error or "-"),
        )
    return table


def status_text(report: StatusReport) -> None:
    """Print `ql3 status` for people: the database time, then one row per schedule."""
    console = _console()
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
            cell(item.name),
            f"{item.state} (overdue)" if item.overdue else str(item.state),
            format_ms(item.next_due_at_ms),
            in_ms(item.next_due_in_ms),
            cell(item.claim_owner_id or "-"),
            in_ms(item.claim_expires_in_ms),
            str(item.runs_admitted),
            format_ms(item.last_admitted_at_ms),
            cell(item.invalid_reason or "-"),
        )
    console.print(table)


def in_ms(value: int | None) -> str:
    """Render a duration in database milliseconds, '-' for none."""
    return "-" if value is None else f"{value} ms"
