"""`ql3 status`, `ql3 runs list`, `ql3 verify`: reading what was admitted and run."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from typing import Annotated

import typer
from ql3_cluster_postgres import HistoryReader, ScheduleAdmin, verify_history
from ql3_runtime_core import LEASE_MS_DEFAULT, LEASE_MS_MAX, LEASE_MS_MIN, AttemptState

from ._cli_common import EXIT_FAILURE, AsJson, Dsn, guarded, print_json, require_dsn
from ._cli_tables import attempts_line, print_table, runs_table, status_text
from ._config import ConfigurationError
from ._time_text import format_ms

__all__ = ["runs_list", "status_command", "verify_command"]


@guarded
def status_command(
    as_json: AsJson = False,
    dsn: Dsn = None,
    lease_ms: Annotated[
        int,
        typer.Option(
            "--lease-ms",
            help="The replicas' lease: overdue means more than lease + grace behind.",
        ),
    ] = LEASE_MS_DEFAULT,
) -> None:
    """Schedules, claims, runs admitted, next due, overdue, attempts by state: in database time.

    Attempts: queued (ready, and waiting out a retry backoff) with the age of the oldest ready
    one, running, succeeded, failed, timed out, abandoned.
    """
    if not LEASE_MS_MIN <= lease_ms <= LEASE_MS_MAX:
        msg = f"--lease-ms: must be {LEASE_MS_MIN}..{LEASE_MS_MAX}, got {lease_ms}"
        raise ConfigurationError(msg)
    target = require_dsn(dsn)
    with ScheduleAdmin(target) as admin:
        report = admin.status(lease_ms=lease_ms)
    with HistoryReader(target) as reader:
        counts = reader.attempt_counts()
    if as_json:
        print_json({**report.model_dump(mode="json"), "attempts": counts.model_dump(mode="json")})
    else:
        status_text(report)
        typer.echo(attempts_line(counts))


@guarded
def runs_list(
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only runs of this schedule.")
    ] = None,
    state: Annotated[
        AttemptState | None,
        typer.Option("--state", help="Only runs whose latest attempt is in this state."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 20,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Recent runs, newest first, with their attempts (state, worker, exit code, output tail).

    A run's state is its latest attempt's: failed, timed_out or abandoned there means it used up
    its attempts.
    """
    with HistoryReader(require_dsn(dsn)) as reader:
        runs = reader.recent_runs(schedule=schedule, state=state, limit=limit)
    if as_json:
        print_json([run.model_dump(mode="json") for run in runs])
    else:
        print_table(runs_table(runs))


@guarded
def verify_command(
    since_ms: Annotated[int | None, typer.Option("--since-ms", help="Only runs from here.")] = None,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Check the admitted history; exit 1 with one line per violation (read-only, ql3_admin).

    A quarantined schedule (state invalid) is a violation (`invalid_schedule`): it admits
    nothing until an operator fixes, resumes or retires it.
    """
    report = verify_history(require_dsn(dsn), since_ms=since_ms)
    if as_json:
        print_json(report.model_dump(mode="json"))
    elif report.ok:
        typer.echo(
            f"ok: {report.schedules} schedules, {report.runs} runs, no violation"
            f" (checked at {format_ms(report.checked_at_ms)})"
        )
    else:
        for violation in report.violations:
            where = "-" if violation.schedule_id is None else str(violation.schedule_id)
            typer.echo(f"{violation.rule}: schedule {where}: {violation.detail}")
        for line in report.unlisted_lines():  # findings past the per-rule cap, counted
            typer.echo(line)
    # Exit 1 with --json too: scripts read the code, the JSON says why.
    if not report.ok:
        raise typer.Exit(EXIT_FAILURE)
