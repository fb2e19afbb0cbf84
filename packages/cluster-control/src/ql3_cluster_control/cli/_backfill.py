"""`ql3 schedule backfill NAME --from T --to T [...]` (as ql3_admin).

Admits, once each, the occurrences of the span that have no Run: those a skip record covers
(any reason) and, with `--include-before-creation`, those before the schedule's first cursor.
Each batch is one transaction; the request id (generated when absent and printed first, so an
interrupted backfill can be rerun exactly) makes a rerun resume where it stopped and admit
nothing twice. Progress goes to stderr: a bar on a terminal, a line per batch otherwise. Nothing
here reads a clock: `--from` and `--to` are instants the operator wrote (with an offset), every
other time is the database's.
"""

# typer builds options from parameters (with defaults), one per flag.
# ruff: noqa: FBT002, PLR0917

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, Annotated

import typer
from ql3_cluster_postgres import BACKFILL_BATCH_DEFAULT, BackfillBatch, ScheduleAdmin
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from ql3_cluster_control._schedule_window import parse_instant

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._time_text import format_ms

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_postgres import BackfillReport

__all__ = ["backfill_text", "schedule_backfill"]

# Listed one by one by --dry-run up to this many; past it, the count and the first and last.
_LIST_AT_MOST = 20


def backfill_text(report: BackfillReport) -> list[str]:
    """Return the lines an operator reads: the clip, the plan (dry run), the summary."""
    plan = report.plan
    zone = plan.timezone
    lines = []
    if plan.clipped is not None:
        lines.append(f"--to clipped to {format_ms(plan.until_ms, zone)}: {plan.clipped}")
    instants = [at for at, _ in plan.occurrences]
    if report.dry_run:
        span = (
            f": first {format_ms(instants[0], zone)}, last {format_ms(instants[-1], zone)}"
            if instants
            else ""
        )
        lines.append(f"would admit {len(instants)} occurrence(s) of {plan.schedule_name!r}{span}")
        if 0 < len(instants) <= _LIST_AT_MOST:
            lines.extend(
                f"  {format_ms(at, zone)}"
                + (" (before creation)" if skip is None else f" (skip record {skip})")
                for at, skip in plan.occurrences
            )
    lines.append(
        f"{'dry run: ' if report.dry_run else ''}admitted {report.admitted}, already had a Run"
        f" {report.already_run}, skipped-before-creation {report.before_creation_left}"
        f" (request {report.request_id!r}"
        + ("" if report.state is None else f", {report.state}")
        + ")"
    )
    return lines


class _Progress:
    """Progress on stderr: rich's bar on a terminal, one plain line per batch otherwise."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, batch: BackfillBatch, done: int, total: int) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=done, total=max(total, 1))
            return
        sys.stderr.write(
            f"batch {batch.batches}: {done}/{total} sent, admitted {batch.admitted},"
            f" already had a Run {batch.already_run} (at {format_ms(batch.batch_at_ms)})\n"
        )
        sys.stderr.flush()

    def run(self, body: Callable[[_Progress], BackfillReport]) -> BackfillReport:
        """Run `body` with this progress; the bar only when stderr is a terminal."""
        if not sys.stderr.isatty():
            return body(self)
        columns = (TextColumn("backfill"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            self.bar, self.task = bar, bar.add_task("backfill", total=None)
            try:
                return body(self)
            finally:
                self.bar = self.task = None


@guarded
def schedule_backfill(
    name: Annotated[str, typer.Argument(help="The schedule to backfill.")],
    from_text: Annotated[
        str, typer.Option("--from", help="First instant, ISO 8601 with an offset.")
    ],
    to_text: Annotated[str, typer.Option("--to", help="Last instant, ISO 8601 with an offset.")],
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            help="Idempotency key (1..128 of A-Z a-z 0-9 . _ : -): the same id again resumes"
            " the same backfill. Generated and printed when absent.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be admitted; write nothing.")
    ] = False,
    include_before_creation: Annotated[
        bool,
        typer.Option(
            "--include-before-creation",
            help="Also admit the occurrences before the schedule's first cursor.",
        ),
    ] = False,
    batch: Annotated[
        int, typer.Option("--batch", help="Occurrences per transaction (1..10000).")
    ] = BACKFILL_BATCH_DEFAULT,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Admit, once each, the occurrences of NAME in [--from, --to] that have no Run.

    Those a skip record covers (misfire, zone rules changed, paused, overlap) and, with
    --include-before-creation, those before the schedule was created; never one at or after its
    cursor (--to is clipped, and the output says so) or outside its window.
    """
    from_ms = parse_instant(from_text, "--from")
    to_ms = parse_instant(to_text, "--to")
    key = request_id if request_id is not None else str(uuid.uuid4())
    conninfo = require_dsn(dsn)
    if not dry_run:
        # First, so that a backfill killed midway can be rerun with the same id.
        sys.stderr.write(f"backfill request {key!r} (rerun with --request-id {key} to resume)\n")
        sys.stderr.flush()

    def body(progress: _Progress) -> BackfillReport:
        with ScheduleAdmin(conninfo) as admin:
            return admin.backfill(
                name,
                from_ms,
                to_ms,
                request_id=key,
                include_before_creation=include_before_creation,
                batch_size=batch,
                dry_run=dry_run,
                progress=progress,
            )

    report = _Progress().run(body)
    if as_json:
        print_json(report.model_dump(mode="json", exclude={"plan": {"occurrences"}}))
    else:
        for line in backfill_text(report):
            typer.echo(line)
