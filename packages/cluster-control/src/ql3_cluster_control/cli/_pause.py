"""`ql3 schedule pause|resume|pauses` (as ql3_admin): recorded paused spans (DESIGN §7).

A pause records who, when, why and until when; a resume chooses what the span's occurrences
become (the replay); `pauses` lists the spans.

`--until` is an instant (ISO 8601 with an offset) or a duration (`90s`, `15m`, `2h`, `1d`) that
the database adds to ITS clock's now, never this node's (rule zero): the duration is sent as
milliseconds and turned into an instant inside the pausing statement.
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from typing import Annotated

import typer
from ql3_cluster_postgres import ScheduleAdmin
from rich.table import Table

from ql3_cluster_control._pause_keys import parse_until

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._tables import cell, print_table
from ._time_text import format_ms

__all__ = ["schedule_pause", "schedule_pauses", "schedule_resume"]


@guarded
def schedule_pause(
    name: str,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (recorded with the span, shown by list).")
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Resume by itself then, replaying nothing: ISO 8601 with an offset, or a"
            " duration (90s, 15m, 2h, 1d) from the DATABASE clock's now.",
        ),
    ] = None,
    dsn: Dsn = None,
) -> None:
    """Pause a schedule: kept with its cursor, never claimed until resumed; the span is recorded."""
    until_ms, after_ms = parse_until(until) if until is not None else (None, None)
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        record = admin.pause(name, reason=reason, until_ms=until_ms, until_after_ms=after_ms)
        spans = admin.pauses(name)
    open_span = next((span for span in reversed(spans) if span.open), None)
    suffix = ""
    if open_span is not None and open_span.until_ms is not None:
        suffix = f" until {format_ms(open_span.until_ms)}"
    typer.echo(f"schedule {record.name!r} is {record.state}{suffix}")


@guarded
def schedule_resume(
    name: str,
    replay: Annotated[
        str,
        typer.Option(
            "--replay",
            help="What the paused span's occurrences become: skip (all recorded `paused`),"
            " fire_once (the latest one is decided, the others recorded), catch_up (all are"
            " decided by the misfire policy).",
        ),
    ] = "skip",
    dsn: Dsn = None,
) -> None:
    """Resume a paused schedule, or a quarantined (invalid) one whose definition reads again."""
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        record = admin.resume(name, replay=replay)
    typer.echo(f"schedule {record.name!r} is {record.state}")


@guarded
def schedule_pauses(name: str, dsn: Dsn = None, as_json: AsJson = False) -> None:
    """List a schedule's recorded paused spans: who, when, why, until, and how each ended."""
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        spans = admin.pauses(name)
    if as_json:
        print_json([span.model_dump() for span in spans])
        return
    table = Table(box=None, pad_edge=False)
    for header in ("paused at", "by", "reason", "until", "resumed", "replay", "recorded paused"):
        table.add_column(header)
    for span in spans:
        resumed = "open"
        if span.resumed_at_ms is not None:
            resumed = f"{format_ms(span.resumed_at_ms)} by {cell(span.resumed_by or '-')}"
            resumed += " (automatic)" if span.automatic else ""
        table.add_row(
            format_ms(span.paused_at_ms),
            cell(span.paused_by),
            cell(span.reason or "-"),
            "-" if span.until_ms is None else format_ms(span.until_ms),
            resumed,
            span.replay or "-",
            "-" if span.skipped_count is None else str(span.skipped_count),
        )
    print_table(table)
