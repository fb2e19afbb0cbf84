"""`ql3 schedule add|list|retire|apply|preview` (as ql3_admin; pause and resume: `_pause`)."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002, PLR0917

from __future__ import annotations

from pathlib import Path  # noqa: TC003  # typer reads annotations at runtime
from typing import Annotated

import typer
from ql3_cluster_postgres import ScheduleAdmin, ScheduleSpec, load_recorded_zone_rules
from ql3_runtime_core import (
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    MISFIRE_GRACE_MS_MAX,
    PREVIEW_COUNT_MAX,
    RETRY_BACKOFF_MS_DEFAULT,
    RETRY_BACKOFF_MS_MAX,
    InvalidArgumentError,
    ScheduleDefinition,
    preview_occurrences,
    wheel_zone_rules,
)

from ql3_cluster_control._alert_keys import alert_settings
from ql3_cluster_control._backfill_file import load_backfill_requests
from ql3_cluster_control._config import ConfigurationError
from ql3_cluster_control._pause_keys import PAUSE_AFTER_FAILURES_MAX
from ql3_cluster_control._schedule_file import (
    TIMEOUT_S_DEFAULT,
    TIMEOUT_S_MAX,
    TIMEOUT_S_MIN,
    load_schedule_file,
    one_off_definition,
    schedule_definition,
    task_execution,
)
from ql3_cluster_control._schedule_overlap import with_overlap
from ql3_cluster_control._schedule_window import schedule_window
from ql3_cluster_control._trigger_file import load_trigger_requests

from ._alerts import AlertCommand, AlertDeadline, AlertOn, AlertWebhook  # noqa: TC001  # typer
from ._backfill import backfill_text
from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._tables import execution_text, print_table, record_json, records_table, window_text
from ._time_text import format_ms, parse_after
from ._trigger import trigger_text

__all__ = [
    "schedule_add",
    "schedule_apply",
    "schedule_list",
    "schedule_preview",
    "schedule_retire",
]

# The flags that spell the alert keys on the command line.
_ALERT = ("--alert-on", "--alert-command", "--alert-webhook", "--alert-deadline")


@guarded
def schedule_add(
    name: Annotated[str, typer.Argument(help="Task and schedule name (unique).")],
    cron: Annotated[
        str | None, typer.Option("--cron", help="5 fields, or 6 with seconds (or give --at).")
    ] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone.")] = "UTC",
    start_at: Annotated[
        str | None,
        typer.Option(
            "--start-at",
            help="Nothing is due before this instant (ISO 8601 with an offset, inclusive).",
        ),
    ] = None,
    end_at: Annotated[
        str | None,
        typer.Option(
            "--end-at",
            help="Nothing is due after this instant (ISO 8601 with an offset, inclusive);"
            " the schedule is then exhausted.",
        ),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="A one-off run at this wall time in --tz (ISO 8601 without offset), instead"
            " of --cron; DST gaps and folds resolved as for cron.",
        ),
    ] = None,
    misfire: Annotated[str, typer.Option("--misfire", help="fire_once|skip|catch_up")] = (
        "fire_once"
    ),
    grace_ms: Annotated[
        int,
        typer.Option(
            "--grace-ms",
            min=0,
            max=MISFIRE_GRACE_MS_MAX,
            help="How late an occurrence is still on time (ms, at most 7 days).",
        ),
    ] = 60_000,
    command: Annotated[
        str | None,
        typer.Option(
            "--command",
            help="Shell command each run executes (/bin/sh -c). Without it: a Python task.",
        ),
    ] = None,
    max_attempts: Annotated[
        int,
        typer.Option(
            "--max-attempts", min=1, max=MAX_ATTEMPTS_MAX, help="Attempts per run, first included."
        ),
    ] = MAX_ATTEMPTS_DEFAULT,
    timeout_s: Annotated[
        int,
        typer.Option(
            "--timeout-s",
            min=TIMEOUT_S_MIN,
            max=TIMEOUT_S_MAX,
            help="An attempt running longer is killed (its process group) and timed out.",
        ),
    ] = TIMEOUT_S_DEFAULT,
    retry_backoff_ms: Annotated[
        int,
        typer.Option(
            "--retry-backoff-ms",
            min=0,
            max=RETRY_BACKOFF_MS_MAX,
            help="Database time from a failed attempt to the next one's earliest start.",
        ),
    ] = RETRY_BACKOFF_MS_DEFAULT,
    pause_after_failures: Annotated[
        int | None,
        typer.Option(
            "--pause-after-failures",
            min=1,
            max=PAUSE_AFTER_FAILURES_MAX,
            help="Pause it (by the database, reason recorded) after this many consecutive"
            " failed runs.",
        ),
    ] = None,
    overlap: Annotated[
        str,
        typer.Option(
            "--overlap",
            help="allow|skip|replace: what a Run due while --max-running Runs of this schedule"
            " are live does (wait, never execute, cancel the oldest).",
        ),
    ] = "allow",
    max_running: Annotated[
        int | None,
        typer.Option(
            "--max-running",
            help="Live Runs at once (default: none under allow, 1 under skip and replace).",
        ),
    ] = None,
    alert_on: AlertOn = None,
    alert_command: AlertCommand = None,
    alert_webhook: AlertWebhook = None,
    alert_deadline: AlertDeadline = None,
    dsn: Dsn = None,
) -> None:
    """Create the task NAME, its cron trigger and its schedule.

    NAME is 1 to 200 printable characters without leading or trailing whitespace. `ql3 worker`
    runs its COMMAND with the environment variables QL3_RUN_ID, QL3_ATTEMPT,
    QL3_SCHEDULED_FOR_MS, QL3_SCHEDULE and QL3_TASK_PAYLOAD; exit 0 is success.

    --overlap and --max-running say what a Run due while that many Runs of the schedule are live
    (running, or due and queued ahead of it; manual Runs count too) does: allow waits for a
    slot, skip never executes (recorded skipped for overlap), replace cancels the oldest.

    --alert-on missed,late,failed,paused records those alerts (once each, by the database) and
    delivers them to --alert-command and/or --alert-webhook; late needs --alert-deadline.

    --start-at/--end-at bound when it may run; --at makes it a one-off, run once. A schedule
    that would have nothing left to run after the database's now (a one-off in the past, a
    window already ended) is refused and nothing is written.
    """
    # The same builders as a schedule file's entries: one set of checks and messages for both.
    definition = _add_definition(cron, tz, misfire, grace_ms, (start_at, end_at, at))
    execution = task_execution(command, max_attempts, timeout_s, retry_backoff_ms)
    execution = with_overlap(execution, overlap, max_running, fields=("--overlap", "--max-running"))
    # Checked before connecting: a bad name is a usage error, never a database one.
    alerts = alert_settings(alert_on, alert_command, alert_webhook, alert_deadline, fields=_ALERT)
    spec = ScheduleSpec(name=name, definition=definition, execution=execution, alerts=alerts)
    dsn = require_dsn(dsn)
    if at is not None:
        # Again with the zone rules the database records: the instant the replicas decide by.
        rules = load_recorded_zone_rules(dsn, [tz])
        definition = one_off_definition(at, tz, misfire, grace_ms, rules=rules, field="--at")
        spec = spec.model_copy(update={"definition": definition})
    with ScheduleAdmin(dsn) as admin:
        try:
            record = admin.add_schedule(
                spec.name,
                spec.definition,
                execution=spec.execution,
                require_occurrence=True,
                pause_after_failures=pause_after_failures,
                alerts=spec.alerts,
            )
        except InvalidArgumentError as exc:
            if exc.argument != "end_at_ms":
                raise
            raise _nothing_left(definition, at, end_at) from exc
    typer.echo(
        f"added schedule {record.name!r} (id {record.schedule_id}),"
        f" next due {format_ms(record.next_due_at_ms, definition.timezone)};"
        f"{_window_text(definition)} runs {execution_text(execution)}"
    )


def _add_definition(
    cron: str | None,
    tz: str,
    misfire: str,
    grace_ms: int,
    when: tuple[str | None, str | None, str | None],
) -> ScheduleDefinition:
    """Build `schedule add`'s definition: a cron with its window, or a one-off (`--at`)."""
    start_at, end_at, at = when
    if at is not None:
        given = [flag for flag, value in (("--cron", cron), ("--start-at", start_at),
                 ("--end-at", end_at)) if value is not None]  # fmt: skip
        if given:
            msg = f"--at excludes {given[0]}: a one-off is its own cron expression and window"
            raise ConfigurationError(msg)
        # This node's rules first, so a bad --at is refused before connecting.
        return one_off_definition(at, tz, misfire, grace_ms, field="--at")
    if cron is None:
        msg = "give --cron (a repeating schedule) or --at (a one-off run)"
        raise ConfigurationError(msg)
    start, end = schedule_window(start_at, end_at, start_field="--start-at", end_field="--end-at")
    return schedule_definition(cron, tz, misfire, grace_ms, start, end)


def _nothing_left(definition: ScheduleDefinition, at: str | None, end_at: str | None) -> Exception:
    """Return the error for a schedule born exhausted, naming the flag that ended it."""
    zone = definition.timezone
    if at is not None:
        when = format_ms(definition.start_at_ms, zone)
        msg = f"--at: {at!r} in {zone} is {when}, not after the database time; nothing written"
    else:
        # Only a window can end a cron schedule: every expression the dialect accepts recurs.
        msg = (
            f"--end-at: {end_at!r} leaves no occurrence of {definition.cron!r} after the"
            " database time (and --start-at); nothing written"
        )
    return ConfigurationError(msg)


def _window_text(definition: ScheduleDefinition) -> str:
    """Return the window part of `schedule add`'s reply (empty without one)."""
    if definition.start_at_ms is None and definition.end_at_ms is None:
        return ""
    return (
        f" window {window_text(definition.start_at_ms, definition.end_at_ms, definition.timezone)};"
    )


@guarded
def schedule_list(as_json: AsJson = False, dsn: Dsn = None) -> None:
    """List schedules with their state and next due time (database time)."""
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        records = admin.list_schedules()
        executions = admin.task_executions()
        # The open span of each paused schedule: its reason and until (DESIGN §7).
        pauses = {span.name: span for span in admin.pauses() if span.open}
    if as_json:
        print_json(
            [
                {
                    **record_json(record),
                    "execution": record_json(executions[record.name])
                    if record.name in executions
                    else None,
                    "pause": pauses[record.name].model_dump() if record.name in pauses else None,
                }
                for record in records
            ]
        )
    else:
        print_table(records_table(records, executions, pauses))


def _change(action: str, name: str, dsn: str | None) -> None:
    # `action` is the ScheduleAdmin method of the same name: pause, resume or retire.
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        record = getattr(admin, action)(name)
    typer.echo(f"schedule {record.name!r} is {record.state}")


@guarded
def schedule_retire(name: str, dsn: Dsn = None) -> None:
    """Retire a schedule: its history stays, it is never claimed again."""
    _change("retire", name, dsn)


@guarded
def schedule_apply(
    file: Annotated[Path, typer.Argument(help="TOML ([[schedule]]) or JSON (list) file.")],
    prune: Annotated[bool, typer.Option("--prune", help="Retire schedules not in FILE.")] = False,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Apply schedules as code in one transaction: create, update, leave unchanged, prune.

    A one-off (`at`) already past when its schedule is first created is created `exhausted`
    and never runs (reapplying the file must not fail once it has run); `ql3 schedule list`
    shows it. Then each `[[trigger]]` (schedule, request_id, payload) admits its manual Run
    once, and each `[[backfill]]` (schedule, from, to, request_id, include_before_creation,
    batch) admits its span's skipped occurrences once: applying the file again finds them
    admitted and writes nothing (a backfill cut short is resumed).
    """
    # One-offs are placed with the zone rules the database records, as the replicas decide;
    # the file is checked whole before they are asked for (bad files never connect).
    requests = load_trigger_requests(file)
    backfills = load_backfill_requests(file)
    specs = load_schedule_file(
        file, lambda zones: load_recorded_zone_rules(require_dsn(dsn), zones)
    )
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        report = admin.apply_schedules(specs, prune=prune)
        # After the schedules: a file may request a Run of a schedule it creates.
        runs = [admin.trigger_run(r.schedule, r.request_id, payload=r.payload) for r in requests]
        filled = [
            admin.backfill(
                b.schedule,
                b.from_ms,
                b.to_ms,
                request_id=b.request_id,
                include_before_creation=b.include_before_creation,
                batch_size=b.batch,
            )
            for b in backfills
        ]
    if as_json:
        print_json(
            {
                **report.model_dump(mode="json"),
                "triggered": [run.model_dump(mode="json") for run in runs],
                "backfilled": [done.model_dump(mode="json") for done in filled],
            }
        )
        return
    typer.echo(
        f"created {len(report.created)}, updated {len(report.updated)},"
        f" unchanged {len(report.unchanged)}, retired {len(report.retired)}"
    )
    for run in runs:
        typer.echo(trigger_text(run))
    for done in filled:
        for line in backfill_text(done):
            typer.echo(line)


@guarded
def schedule_preview(
    cron: Annotated[str, typer.Option("--cron", help="5 fields, or 6 with seconds.")],
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone.")] = "UTC",
    after_ms: Annotated[int | None, typer.Option("--after-ms", help="Epoch ms.")] = None,
    after: Annotated[
        str | None, typer.Option("--after", help="ISO 8601; without offset read in --tz.")
    ] = None,
    count: Annotated[int, typer.Option("--count", min=1, max=PREVIEW_COUNT_MAX)] = 10,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Show the next occurrences of a cron expression, DST rules applied (DESIGN §4).

    With a database (--dsn/QL3_DSN) they are computed with the zone rules it records; without,
    with this node's tzdata (a note on stderr names its version).
    """
    # Built first: a bad cron or zone is refused before anything else is asked of the user.
    definition = schedule_definition(cron, tz)
    if after_ms is not None and after is not None:
        msg = "--after and --after-ms are exclusive; give one"
        raise ConfigurationError(msg)
    if after is not None:
        start = parse_after(after, tz)
    elif after_ms is not None:
        start = after_ms
    elif dsn:
        # "From now" means the database's now: the node clock is never a fallback (rule zero).
        with ScheduleAdmin(dsn) as admin:
            start = admin.database_now_ms()
    else:
        msg = (
            "no start time: pass --after or --after-ms, or a database (--dsn/QL3_DSN) to start"
            " from its clock; QL3 never reads the node clock"
        )
        raise ConfigurationError(msg)
    # With a database, the rules it records decide (as they decide for every replica); without
    # one, this node's tzdata wheel, and the output says so.
    rules = load_recorded_zone_rules(dsn, [tz]) if dsn else wheel_zone_rules()
    occurrences = preview_occurrences(
        definition.cron, definition.timezone, start, count, rules=rules
    )
    if not dsn:
        typer.echo(
            f"(no database: computed with this node's zone rules, tzdata {rules.version})",
            err=True,
        )
    if as_json:
        print_json(occurrences)
        return
    for occurrence in occurrences:
        typer.echo(f"{format_ms(occurrence, definition.timezone, rules)}  {occurrence}")
