"""Tables the `ql3` command line prints for people (scripts use `--json`).

Every time shown is a database time (epoch ms from `clock_timestamp()`), rendered in ISO 8601.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ql3_cluster_control._schedule_overlap import overlap_text

from ._time_text import format_ms

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pydantic import BaseModel
    from ql3_cluster_postgres import (
        AttemptCounts,
        PauseSpan,
        RunSummary,
        ScheduleRecord,
        StatusReport,
    )
    from ql3_runtime_core import TaskExecution

__all__ = [
    "attempts_line",
    "cell",
    "execution_text",
    "in_ms",
    "print_table",
    "record_json",
    "records_table",
    "runs_table",
    "state_reason",
    "status_text",
    "window_text",
]

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
        # repr() of a character is its escape inside quotes; the slice drops the quotes.
        text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    return escape(text)


def record_json(record: BaseModel) -> dict[str, Any]:
    """Return a record as plain JSON values."""
    return record.model_dump(mode="json")


def execution_text(execution: TaskExecution | None) -> str:
    """Say in a few words what a schedule's runs execute (DESIGN §10)."""
    if execution is None:
        return "-"
    what = "python task" if execution.command is None else execution.command
    # The overlap policy only when it can hold a Run back (allow without a cap never does).
    overlap = "" if execution.max_running is None else f", overlap {overlap_text(execution)}"
    return (
        f"{what} (attempts {execution.max_attempts}, timeout {execution.timeout_ms // 1000} s,"
        f" backoff {execution.retry_backoff_ms} ms{overlap})"
    )


def window_text(start_at_ms: int | None, end_at_ms: int | None, tz: str = "UTC") -> str:
    """Render a schedule's window as `start .. end` in `tz`; an open side shows '-'.

    A one-off's window is one instant (start = end), shown once as `at <instant>`.
    """
    if start_at_ms is None and end_at_ms is None:
        return "-"
    if start_at_ms is not None and start_at_ms == end_at_ms:
        return f"at {format_ms(start_at_ms, tz)}"
    return f"{format_ms(start_at_ms, tz)} .. {format_ms(end_at_ms, tz)}"


def state_reason(state: str, reason: str | None) -> str:
    """Say why a schedule is in its state: the quarantine reason, or why it is exhausted."""
    if reason:
        return reason
    if state == "exhausted":
        return "no occurrence left in its window"
    return "-"


def pause_text(span: PauseSpan | None) -> str | None:
    """Say why and until when a schedule is paused (its open span), or None."""
    if span is None:
        return None
    text = f"paused by {span.paused_by}: {span.reason or 'no reason given'}"
    if span.until_ms is not None:
        text += f"; resumes by itself at {format_ms(span.until_ms)}"
    return text


def records_table(
    records: list[ScheduleRecord],
    executions: Mapping[str, TaskExecution] | None = None,
    pauses: Mapping[str, PauseSpan] | None = None,
) -> Table:
    """Build the `ql3 schedule list` table; next due in each schedule's own zone.

    A quarantined schedule shows why in the `reason` column (a definition this node cannot read
    shows that too), an exhausted one that its window has nothing left; its times are in UTC
    when its own zone cannot be loaded. `window` is start .. end (`at` for a one-off). The last
    column says what its runs execute.
    """
    runs = executions or {}
    table = Table(box=None, pad_edge=False)
    for column in (
        "name", "state", "cron", "tz", "misfire", "grace_ms", "window", "next due", "claimed by",
        "reason", "runs",
    ):  # fmt: skip
        table.add_column(column)
    for record in records:
        definition = record.definition
        # A definition this node cannot read may name a zone it cannot load: show UTC then.
        zone = "UTC" if definition is None else definition.timezone
        table.add_row(
            cell(record.name),
            str(record.state),
            cell(record.cron),
            cell(record.timezone),
            "-" if definition is None else str(definition.misfire_policy),
            "-" if definition is None else str(definition.misfire_grace_ms),
            "-"
            if definition is None
            else window_text(definition.start_at_ms, definition.end_at_ms, zone),
            format_ms(record.next_due_at_ms, zone),
            cell(record.claim_owner_id or "-"),
            cell(
                state_reason(
                    record.state,
                    record.invalid_reason
                    or record.definition_error
                    or pause_text((pauses or {}).get(record.name)),
                )
            ),
            cell(execution_text(runs.get(record.name))),
        )
    return table


def status_text(report: StatusReport) -> None:
    """Print `ql3 status` for people: the database time, then one row per schedule.

    `runs` counts the cron series' runs, `manual` the Runs triggered by hand (never occurrences).
    """
    console = _console()
    now = report.database_now_ms
    console.print(
        f"database time {format_ms(now)} ({now}); {len(report.schedules)} schedules,"
        f" {report.claims_held} claims held, next due in {in_ms(report.next_due_in_ms)},"
        f" {report.schedules_overdue} overdue (more than lease {report.lease_ms} ms + grace);"
        f" zone rules tzdata {report.zone_rules_version or 'none recorded'}"
    )
    if report.replication is not None:
        console.print(f"replication: {report.replication.describe()}", markup=False)
    if report.invalid_schedules:
        # markup=False: the count line is ours, but keep rich from reading brackets in it.
        console.print(
            f"{report.invalid_schedules} schedule(s) quarantined (state invalid): they admit"
            " nothing until fixed (ql3 schedule apply) or resumed or retired",
            markup=False,
        )
    table = Table(box=None, pad_edge=False)
    for column in (
        "name", "state", "window (UTC)", "next due (UTC)", "due in", "claimed by",
        "claim expires in", "runs", "manual", "backfilled", "last admitted (UTC)", "reason",
        "overlap",
    ):  # fmt: skip
        table.add_column(column)
    for item in report.schedules:
        table.add_row(
            cell(item.name),
            f"{item.state} (overdue)" if item.overdue else str(item.state),
            window_text(item.start_at_ms, item.end_at_ms),
            format_ms(item.next_due_at_ms),
            in_ms(item.next_due_in_ms),
            cell(item.claim_owner_id or "-"),
            in_ms(item.claim_expires_in_ms),
            str(item.runs_admitted),
            str(item.manual_runs),
            str(item.backfilled_runs),
            format_ms(item.last_admitted_at_ms),
            cell(state_reason(item.state, item.invalid_reason)),
            item.overlap.value
            if item.max_running is None
            else f"{item.overlap.value} (max running {item.max_running})",
        )
    console.print(table)


def in_ms(value: int | None) -> str:
    """Render a duration in database milliseconds, '-' for none."""
    return "-" if value is None else f"{value} ms"


def attempts_line(counts: AttemptCounts) -> str:
    """One line of `ql3 status` on execution: attempts by state, the oldest ready one's age."""
    oldest = "-" if counts.oldest_queued_age_ms is None else f"{counts.oldest_queued_age_ms} ms"
    return (
        f"attempts: {counts.queued} queued ({counts.queued_ready} ready, oldest waiting"
        f" {oldest}; {counts.queued_waiting} waiting out a retry backoff), {counts.running}"
        f" running ({counts.running_lease_expired} with an expired lease), {counts.succeeded}"
        f" succeeded, {counts.failed} failed, {counts.timed_out} timed out,"
        f" {counts.abandoned} abandoned, {counts.skipped} skipped and {counts.cancelled}"
        " cancelled for overlap"
    )


def _last_line(text: str | None, width: int = 80) -> str:
    """Return the last non-empty line of an output tail, cut to `width` characters."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return "-"
    line = lines[-1].strip()
    # The table stays one line per run; the whole tail is in `ql3 runs list --json`.
    return line if len(line) <= width else line[: width - 3] + "..."


def runs_table(runs: Sequence[RunSummary]) -> Table:
    """Build the `ql3 runs list` table: one row per run, newest first, its latest attempt's end."""
    table = Table(box=None, pad_edge=False)
    for column in (
        "run", "kind", "schedule", "scheduled for (UTC)", "state", "attempts", "worker", "exit",
        "finished (UTC)", "last output",
    ):  # fmt: skip
        table.add_column(column)
    for run in runs:
        # The latest attempt says how the run stands; earlier ones are in `--json`.
        latest = run.attempts[-1] if run.attempts else None
        table.add_row(
            str(run.run_id),
            # A manual Run shows its request id: the key an operator triggered it with.
            run.kind if run.request_id is None else f"manual ({cell(run.request_id)})",
            cell(run.schedule_name),
            format_ms(run.scheduled_for_ms),
            "-" if run.state is None else str(run.state),
            str(len(run.attempts)),
            cell((latest and latest.worker_id) or "-"),
            "-" if latest is None or latest.exit_code is None else str(latest.exit_code),
            format_ms(None if latest is None else latest.finished_at_ms),
            cell(_last_line(None if latest is None else latest.output_tail)),
        )
    return table
