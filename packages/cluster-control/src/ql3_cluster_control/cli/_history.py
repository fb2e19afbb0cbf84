"""`ql3 status`, `ql3 runs list`, `ql3 verify`: reading what was admitted and run."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002, PLR0917

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

import typer
from ql3_cluster_postgres import (
    HistoryReader,
    ScheduleAdmin,
    record_verify_report,
    verify_history,
)
from ql3_runtime_core import LEASE_MS_DEFAULT, LEASE_MS_MAX, LEASE_MS_MIN, AttemptState

from ql3_cluster_control._config import ConfigurationError

from ._common import EXIT_FAILURE, AsJson, Dsn, guarded, print_json, require_dsn
from ._tables import attempts_line, pause_text, print_table, runs_table, status_text
from ._time_text import format_ms

__all__ = ["RunKind", "runs_list", "status_command", "verify_command"]


class RunKind(StrEnum):
    """The kinds of Run `ql3 runs list --kind` filters on (`runs.kind`)."""

    CRON = "cron"
    MANUAL = "manual"
    BACKFILL = "backfill"


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
        # Each paused schedule's open span: why, and until when (DESIGN §7).
        paused = [span for span in admin.pauses() if span.open]
    with HistoryReader(target) as reader:
        counts = reader.attempt_counts()
    if as_json:
        print_json(
            {
                **report.model_dump(mode="json"),
                "attempts": counts.model_dump(mode="json"),
                "paused": [span.model_dump() for span in paused],
            }
        )
    else:
        status_text(report)
        typer.echo(attempts_line(counts))
        for span in paused:
            typer.echo(f"{span.name}: {pause_text(span)}")


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
    kind: Annotated[
        RunKind | None,
        typer.Option(
            "--kind",
            help="Only cron runs (occurrences), manual (triggered) or backfill (admitted late).",
        ),
    ] = None,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Recent runs, newest first, with their attempts (state, worker, exit code, output tail).

    A run's state is its latest attempt's: failed, timed_out or abandoned there means it used up
    its attempts.
    """
    with HistoryReader(require_dsn(dsn)) as reader:
        runs = reader.recent_runs(
            schedule=schedule,
            state=state,
            limit=limit,
            kind=None if kind is None else kind.value,
        )
    if as_json:
        print_json([run.model_dump(mode="json") for run in runs])
    else:
        print_table(runs_table(runs))


@guarded
def verify_command(
    since_ms: Annotated[int | None, typer.Option("--since-ms", help="Only runs from here.")] = None,
    lease_ms: Annotated[
        int,
        typer.Option(
            "--lease-ms",
            envvar="QL3_LEASE_MS",
            help="The replicas' lease (or QL3_LEASE_MS): stall, late and skip records are judged"
            " against lease + grace.",
        ),
    ] = LEASE_MS_DEFAULT,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="Judge stalls at this instant (epoch ms, or an ISO 8601 timestamp with its"
            " offset) instead of the database clock, to repeat a report.",
        ),
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Also store the verdict in ql3.verify_results (the web console shows the"
            " latest); the only write verify makes.",
        ),
    ] = False,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Check the admitted history; exit 1 with one line per violation (read-only, ql3_admin).

    \b
    Rules (each finding is one line "RULE: schedule ID: detail"):
      duplicate         an occurrence admitted more than once
      early             a run committed before its occurrence
      future            a run committed after the database clock
      shape             a run without exactly one first attempt and admission events
      attempts          misnumbered, past max_attempts, overlapping, retried early, events off
      time_backwards    commit times going backwards along a schedule's runs
      order             occurrences going backwards along a schedule's runs
      invalid_schedule  a quarantined or unreadable schedule (admits nothing)
      stale_claim       a claim long expired: no replica is deciding it
      cursor            a cursor off its cron, behind its latest run or past end_at
      revision          schedule revisions that do not hold together
      missing           an occurrence before the cursor with neither a run nor a skip record
      stall             an active schedule's cursor more than lease + grace behind --as-of
      late              a run admitted later than its misfire policy allows
      misfire_policy    a claim's missed span decided against its policy
      skip_record       a skip record whose contents or writing do not match its claim
      not_occurrence    a run that is not an occurrence of its schedule's revision
      manual_run        a manual Run (trigger) not admitted at its instant or not announced
      backfill          a backfilled Run no skip record (or before-creation request) justifies
      paused            a paused span broken: a record outside it, a run its replay refuses
      checkpoint        pruned history not proven: chain, counts, rows left, or removed bare
      overlap           an overlap skip without its never-executed Run (or the reverse), or
                        more Runs of a schedule executing at once than its cap
      alert             an alert twice, an alert without its condition, or (for a schedule
                        that asked) a condition past its bound without its alert

    Manual Runs (`ql3 schedule trigger`) are no occurrences: the occurrence rules ignore them
    and they are counted apart; shape and attempts judge them like any Run. A backfilled Run
    (`ql3 schedule backfill`) fills its occurrence late, on purpose: its skip record still
    accounts for it and the rule backfill judges the Run. Pruned history (`ql3 history prune`)
    is proven by its chain of checkpoints; each schedule is accounted from the latest one on.
    Also printed: each schedule's admission lateness (p50, p99, max). A quarantined schedule
    (state invalid) is a violation: it admits nothing until an operator fixes, resumes or
    retires it.
    """  # noqa: D301 - "\b" is click's marker: keep the rule table's lines as written
    if not LEASE_MS_MIN <= lease_ms <= LEASE_MS_MAX:
        msg = f"--lease-ms: must be {LEASE_MS_MIN}..{LEASE_MS_MAX}, got {lease_ms}"
        raise ConfigurationError(msg)
    report = verify_history(
        require_dsn(dsn), since_ms=since_ms, lease_ms=lease_ms, as_of_ms=_as_of_ms(as_of)
    )
    if record:
        recorded = record_verify_report(require_dsn(dsn), report)
        typer.echo(f"recorded as verdict {recorded} (ql3.verify_results)", err=True)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        if report.ok:
            typer.echo(
                f"ok: {report.schedules} schedules, {report.runs} runs,"
                f" {report.manual_runs} manual runs, {report.backfilled_runs} backfilled,"
                f" {report.overlap_skipped} skipped for overlap, no violation"
                f" (checked at {format_ms(report.checked_at_ms)})"
            )
        else:
            for violation in report.violations:
                where = "-" if violation.schedule_id is None else str(violation.schedule_id)
                typer.echo(f"{violation.rule}: schedule {where}: {violation.detail}")
            for line in report.unlisted_lines():  # findings past the per-rule cap, counted
                typer.echo(line)
        for lateness in report.lateness:
            typer.echo(lateness.line())
    # Exit 1 with --json too: scripts read the code, the JSON says why.
    if not report.ok:
        raise typer.Exit(EXIT_FAILURE)


def _as_of_ms(text: str | None) -> int | None:
    """Read `--as-of`: epoch ms, or an ISO 8601 timestamp that says its offset (no local time)."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        instant = datetime.fromisoformat(text)
    except ValueError as exc:
        msg = f"--as-of: {text!r} is neither epoch ms nor an ISO 8601 timestamp ({exc})"
        raise ConfigurationError(msg) from exc
    if instant.tzinfo is None:
        # A wall time without an offset means the reading machine's zone: refused, not guessed.
        msg = f"--as-of: {text!r} has no UTC offset (write e.g. 2026-12-05T12:00:00Z)"
        raise ConfigurationError(msg)
    return int(instant.timestamp() * 1000)
