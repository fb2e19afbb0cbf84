"""`ql3 history prune` (as ql3_admin): retention with verified checkpoints (DESIGN §7).

The cutoff is the DATABASE clock's now minus `--older-than`: the duration is sent as milliseconds
and subtracted inside the pruning function, never from this node's clock (rule zero).
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from typing import Annotated

import typer
from ql3_cluster_postgres import PRUNE_BATCH_DEFAULT, parse_duration_ms, prune_history

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._time_text import format_ms

__all__ = ["history_prune"]


@guarded
def history_prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Prune what is older than this, by the DATABASE clock: 30d, 12h, 90m or 45s."
            " Refused below the longest lease + grace + retry span of this database.",
        ),
    ],
    batch: Annotated[
        int,
        typer.Option("--batch", help="Runs removed per batch (one transaction, one checkpoint)."),
    ] = PRUNE_BATCH_DEFAULT,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; write nothing.")
    ] = False,
    dsn: Dsn = None,
    as_json: AsJson = False,
) -> None:
    """Remove old Runs, attempts, events and skip records, leaving checkpoints verify proves."""
    older_than_ms = parse_duration_ms(older_than)
    report = prune_history(
        require_dsn(dsn), older_than_ms=older_than_ms, batch=batch, dry_run=dry_run
    )
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    verb = "would remove" if dry_run else "removed"
    for item in report.checkpoints:
        where = f"below {format_ms(item.covered_below_ms)}"
        clip = f" (clipped by {item.clipped_by})" if item.clipped_by else ""
        seq = "" if item.seq is None else f", checkpoint {item.seq}"
        typer.echo(
            f"schedule {item.schedule_id}: {verb} {item.runs} run(s), {item.skip_records} skip"
            f" record(s), {item.attempts} attempt(s), {item.events} event(s) {where}{clip}{seq}"
        )
    typer.echo(f"{verb} {report.runs} run(s) in {report.batches} batch(es)")
