"""The `ql3` command line (typer): schema, roles, schedules, replicas, workers, status, history.

Commands: migrate, roles, schedule, zone-rules, run (a Coordinator replica), worker (issue 13),
status, runs, verify, demo.

Exit codes scripts can rely on: 0 success, 2 usage or configuration error (bad flag, bad cron
expression, unknown timezone, unknown `QL3_*` variable), 3 schema mismatch, 1 any other failure
(unreachable database, unknown schedule, a violation found by `verify`). Errors are one line on
stderr, `ql3: error: ...`, never a traceback. This is the only module that installs log handlers.
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002, PLR0917

from __future__ import annotations

import functools
import json
import logging
import sys
from importlib.metadata import version as distribution_version
from pathlib import Path  # noqa: TC003  # typer reads annotations at runtime
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from ql3_cluster_postgres import (
    HistoryReader,
    ScheduleAdmin,
    ScheduleSpec,
    SchemaMismatchError,
    adopt_zone_rules,
    migrate,
    provision_roles,
    provision_roles_if_missing,
    read_zone_rules,
    record_zone_rules,
    verify_history,
)
from ql3_runtime_core import (
    LEASE_MS_DEFAULT,
    LEASE_MS_MAX,
    LEASE_MS_MIN,
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    MISFIRE_GRACE_MS_MAX,
    PREVIEW_COUNT_MAX,
    RETRY_BACKOFF_MS_DEFAULT,
    RETRY_BACKOFF_MS_MAX,
    AttemptState,
    QL3Error,
    preview_occurrences,
    zone_rules_version,
)

from ._config import ConfigurationError, LogFormat, check_environment, load_settings
from ._demo import DemoOptions, run_demo
from ._logs import configure_logging
from ._render import (
    attempts_line,
    execution_text,
    print_table,
    record_json,
    records_table,
    runs_table,
    status_text,
)
from ._schedules import (
    TIMEOUT_S_DEFAULT,
    TIMEOUT_S_MAX,
    TIMEOUT_S_MIN,
    format_ms,
    load_schedule_file,
    parse_after,
    schedule_definition,
    task_execution,
)
from ._service import CoordinatorService
from ._worker import Worker
from ._worker_config import load_worker_settings

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["app", "main"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

app = typer.Typer(
    name="ql3",
    help="QL3: cron admission exactly once, on time, with PostgreSQL's clock as the only clock.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)
schedule_app = typer.Typer(help="Manage schedules (runs as ql3_admin).", no_args_is_help=True)
roles_app = typer.Typer(help="Provision the least-privilege roles.", no_args_is_help=True)
zone_rules_app = typer.Typer(
    help="The zone rules (tzdata) version every replica must decide with.", no_args_is_help=True
)
runs_app = typer.Typer(
    help="Admitted runs and their attempts (read as ql3_admin).", no_args_is_help=True
)
app.add_typer(schedule_app, name="schedule")
app.add_typer(runs_app, name="runs")
app.add_typer(roles_app, name="roles")
app.add_typer(zone_rules_app, name="zone-rules")

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SCHEMA = 3
EXIT_INTERRUPTED = 130

Dsn = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="QL3_DSN",
        show_envvar=True,
        help="libpq connection string or URI of the QL3 database.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _fail(code: int, message: str) -> typer.Exit:
    # Driver messages span lines (libpq adds a hint line): keep the promise of one line. Only
    # line breaks go: a quoted value keeps its spaces ('   ' is not ' ').
    one_line = " ".join(line.strip() for line in message.splitlines() if line.strip())
    sys.stderr.write(f"ql3: error: {one_line}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        detail = error["msg"].removeprefix("Value error, ")
        parts.append(detail if not field or detail.startswith(field) else f"{field}: {detail}")
    return "; ".join(parts)


def _guarded(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn QL3 errors into one stderr line and the documented exit code."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return func(*args, **kwargs)
        except SchemaMismatchError as exc:
            raise _fail(EXIT_SCHEMA, str(exc)) from None
        except ValidationError as exc:
            raise _fail(EXIT_USAGE, _describe_validation(exc)) from None
        except ConfigurationError as exc:
            raise _fail(EXIT_USAGE, str(exc)) from None
        except QL3Error as exc:
            code = EXIT_USAGE if isinstance(exc, ValueError) and _is_usage(exc) else EXIT_FAILURE
            raise _fail(code, str(exc)) from None
        except OSError as exc:
            raise _fail(EXIT_FAILURE, str(exc)) from None

    return wrapper


def _is_usage(exc: QL3Error) -> bool:
    """Bad values given on the command line (cron, zone, a number out of range) are usage errors."""
    from ql3_runtime_core import (  # noqa: PLC0415
        InvalidArgumentError,
        InvalidCronError,
        UnknownTimezoneError,
    )

    return isinstance(exc, InvalidCronError | UnknownTimezoneError | InvalidArgumentError)


def _require_dsn(dsn: str | None) -> str:
    if not dsn:
        msg = "no database given: pass --dsn or set QL3_DSN"
        raise ConfigurationError(msg)
    return dsn


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=None, sort_keys=True, default=str) + "\n")


# The three wheels are installed and upgraded separately: a report names each one's version.
_DISTRIBUTIONS = ("ql3-cluster-control", "ql3-cluster-postgres", "ql3-runtime-core")


def version_lines() -> list[str]:
    """Return `ql3 --version`: each QL3 wheel's version, then the zone rules (tzdata) one."""
    lines = [f"{name} {distribution_version(name)}" for name in _DISTRIBUTIONS]
    return [*lines, f"tzdata {zone_rules_version()} (zone rules)"]


def _print_version(value: bool) -> None:  # noqa: FBT001  # click calls it with the flag
    if value:
        typer.echo("\n".join(version_lines()))
        raise typer.Exit


@app.callback()
@_guarded
def _root(
    version: Annotated[  # noqa: ARG001  # acted on by its eager callback
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print the versions of the QL3 wheels and zone rules, then exit.",
        ),
    ] = False,
) -> None:
    """QL3 cron admission: every occurrence exactly once, on time, by the database clock."""
    # Refuse QL3_CLOCK (rule zero) and misspelt QL3_* variables before any command runs.
    check_environment()


@app.command("migrate")
@_guarded
def migrate_command(dsn: Dsn = None) -> None:
    """Apply pending schema migrations; run it as the schema owner (a ql3_owner login).

    Run as a superuser on a database without the QL3 roles or schema, it provisions them first
    (as `ql3 roles provision`) and prints each step, so a fresh database takes one command. Also
    records this node's zone rules (tzdata) version when none is recorded yet; an existing
    record is kept (switch it with `ql3 zone-rules adopt`).
    """
    target = _require_dsn(dsn)
    for step in provision_roles_if_missing(target):
        typer.echo(f"provisioned: {step}")
    applied = migrate(target)
    if applied:
        for name in applied:
            typer.echo(f"applied {name}")
    else:
        typer.echo("schema is up to date")
    change = record_zone_rules(target)
    local = zone_rules_version()
    if change.previous is None:
        typer.echo(f"recorded zone rules tzdata {change.current.version} (this node's)")
    elif change.current.version == local:
        typer.echo(f"zone rules tzdata {local} already recorded (this node's)")
    else:
        typer.echo(
            f"zone rules: the database records tzdata {change.current.version}, this node has"
            f" {local}; replicas with {local} claim nothing until `ql3 zone-rules adopt`"
        )


@roles_app.command("provision")
@_guarded
def roles_provision(dsn: Dsn = None) -> None:
    """Create the group roles ql3_owner, ql3_admin, ql3_runtime, ql3_worker_ingress and grants.

    Run as a superuser (a CREATEROLE login is not enough: provisioning resets role attributes
    such as NOSUPERUSER, which only a superuser may); idempotent. Prints one line per step.
    """
    for step in provision_roles(_require_dsn(dsn)):
        typer.echo(step)


@zone_rules_app.command("show")
@_guarded
def zone_rules_show(as_json: AsJson = False, dsn: Dsn = None) -> None:
    """Show the recorded zone rules version and this node's; replicas claim only if they agree."""
    record = read_zone_rules(_require_dsn(dsn))
    local = zone_rules_version()
    recorded = None if record is None else record.version
    if as_json:
        _print_json(
            {
                "recorded": None if record is None else record.model_dump(mode="json"),
                "this_node": local,
                "agree": recorded == local,
            }
        )
        return
    if record is None:
        typer.echo(f"recorded: none (run `ql3 migrate`); this node: tzdata {local}")
        return
    agreement = "agree" if recorded == local else "DIFFER: replicas like this one claim nothing"
    typer.echo(
        f"recorded: tzdata {record.version} (at {format_ms(record.recorded_at_ms)} by"
        f" {record.recorded_by}); this node: tzdata {local}; {agreement}"
    )


@zone_rules_app.command("adopt")
@_guarded
def zone_rules_adopt(dsn: Dsn = None) -> None:
    """Make this node's zone rules the recorded ones, atomically for every replica (ql3_admin).

    From then on only replicas with this node's tzdata version claim; claims taken under the old
    rules can no longer commit. Run it once the upgraded replicas are deployed.
    """
    change = adopt_zone_rules(_require_dsn(dsn))
    if not change.changed:
        typer.echo(f"zone rules already tzdata {change.current.version}; nothing changed")
        return
    typer.echo(
        f"zone rules: tzdata {change.previous or 'none'} -> {change.current.version}"
        f" ({change.fenced_claims} claims taken under the old rules fenced)"
    )


@schedule_app.command("add")
@_guarded
def schedule_add(
    name: Annotated[str, typer.Argument(help="Task and schedule name (unique).")],
    cron: Annotated[str, typer.Option("--cron", help="5 fields, or 6 with seconds.")],
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone.")] = "UTC",
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
    dsn: Dsn = None,
) -> None:
    """Create the task NAME, its cron trigger and its schedule.

    NAME is 1 to 200 printable characters without leading or trailing whitespace. `ql3 worker`
    runs its COMMAND with the environment variables QL3_RUN_ID, QL3_ATTEMPT,
    QL3_SCHEDULED_FOR_MS, QL3_SCHEDULE and QL3_TASK_PAYLOAD; exit 0 is success.
    """
    definition = schedule_definition(cron, tz, misfire, grace_ms)
    execution = task_execution(command, max_attempts, timeout_s, retry_backoff_ms)
    # Checked before connecting: a bad name is a usage error, never a database one.
    spec = ScheduleSpec(name=name, definition=definition, execution=execution)
    with ScheduleAdmin(_require_dsn(dsn)) as admin:
        record = admin.add_schedule(spec.name, spec.definition, execution=spec.execution)
    typer.echo(
        f"added schedule {record.name!r} (id {record.schedule_id}),"
        f" next due {format_ms(record.next_due_at_ms, definition.timezone)};"
        f" runs {execution_text(execution)}"
    )


@schedule_app.command("list")
@_guarded
def schedule_list(as_json: AsJson = False, dsn: Dsn = None) -> None:
    """List schedules with their state and next due time (database time)."""
    with ScheduleAdmin(_require_dsn(dsn)) as admin:
        records = admin.list_schedules()
        executions = admin.task_executions()
    if as_json:
        _print_json(
            [
                {
                    **record_json(record),
                    "execution": record_json(executions[record.name])
                    if record.name in executions
                    else None,
                }
                for record in records
            ]
        )
    else:
        print_table(records_table(records, executions))


def _change(action: str, name: str, dsn: str | None) -> None:
    with ScheduleAdmin(_require_dsn(dsn)) as admin:
        record = getattr(admin, action)(name)
    typer.echo(f"schedule {record.name!r} is {record.state}")


@schedule_app.command("pause")
@_guarded
def schedule_pause(name: str, dsn: Dsn = None) -> None:
    """Pause a schedule: kept with its cursor, never claimed until resumed."""
    _change("pause", name, dsn)


@schedule_app.command("resume")
@_guarded
def schedule_resume(name: str, dsn: Dsn = None) -> None:
    """Resume a paused schedule, or a quarantined (invalid) one whose definition reads again."""
    _change("resume", name, dsn)


@schedule_app.command("retire")
@_guarded
def schedule_retire(name: str, dsn: Dsn = None) -> None:
    """Retire a schedule: its history stays, it is never claimed again."""
    _change("retire", name, dsn)


@schedule_app.command("apply")
@_guarded
def schedule_apply(
    file: Annotated[Path, typer.Argument(help="TOML ([[schedule]]) or JSON (list) file.")],
    prune: Annotated[bool, typer.Option("--prune", help="Retire schedules not in FILE.")] = False,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Apply schedules as code in one transaction: create, update, leave unchanged, prune."""
    specs = load_schedule_file(file)
    with ScheduleAdmin(_require_dsn(dsn)) as admin:
        report = admin.apply_schedules(specs, prune=prune)
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    typer.echo(
        f"created {len(report.created)}, updated {len(report.updated)},"
        f" unchanged {len(report.unchanged)}, retired {len(report.retired)}"
    )


@schedule_app.command("preview")
@_guarded
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
    """Show the next occurrences of a cron expression, DST rules applied (SPEC §6)."""
    definition = schedule_definition(cron, tz)
    if after_ms is not None and after is not None:
        msg = "--after and --after-ms are exclusive; give one"
        raise ConfigurationError(msg)
    if after is not None:
        start = parse_after(after, tz)
    elif after_ms is not None:
        start = after_ms
    elif dsn:
        with ScheduleAdmin(dsn) as admin:
            start = admin.database_now_ms()
    else:
        msg = (
            "no start time: pass --after or --after-ms, or a database (--dsn/QL3_DSN) to start"
            " from its clock; QL3 never reads the node clock"
        )
        raise ConfigurationError(msg)
    occurrences = preview_occurrences(definition.cron, definition.timezone, start, count)
    if as_json:
        _print_json(occurrences)
        return
    for occurrence in occurrences:
        typer.echo(f"{format_ms(occurrence, definition.timezone)}  {occurrence}")


@app.command("run")
@_guarded
def run_command(  # one flag per setting
    dsn: Annotated[str | None, typer.Option("--dsn", help="Or QL3_DSN.")] = None,
    owner_id: Annotated[str | None, typer.Option("--owner-id")] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port")] = None,
    log_format: Annotated[LogFormat | None, typer.Option("--log-format")] = None,
    log_level: Annotated[str | None, typer.Option("--log-level")] = None,
    lease_ms: Annotated[int | None, typer.Option("--lease-ms")] = None,
    claim_batch: Annotated[int | None, typer.Option("--claim-batch")] = None,
    cycle_budget: Annotated[int | None, typer.Option("--cycle-budget")] = None,
    poll_interval_ms: Annotated[int | None, typer.Option("--poll-interval-ms")] = None,
    clock: Annotated[str | None, typer.Option("--clock", hidden=True)] = None,
) -> None:
    """Run the Coordinator daemon until SIGTERM/SIGINT (then release claims and exit 0).

    Every setting is also read from QL3_<NAME> (QL3_DSN, QL3_LEASE_MS, QL3_KEEPALIVES_IDLE_S, ...).
    """
    settings = load_settings(
        dsn=dsn,
        owner_id=owner_id,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
        lease_ms=lease_ms,
        claim_batch=claim_batch,
        cycle_budget=cycle_budget,
        poll_interval_ms=poll_interval_ms,
        clock=clock,
    )
    if settings.dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_DSN"
        raise ConfigurationError(msg)
    configure_logging(settings.log_format, level=settings.log_level, owner_id=settings.owner_id)
    service = CoordinatorService(settings)
    service.install_signal_handlers()
    try:
        code = service.run()
    except SchemaMismatchError as exc:
        logger.error("schema mismatch: %s", exc, extra={"event": "service.schema_mismatch"})  # noqa: TRY400  # one line, no traceback
        raise
    raise typer.Exit(code)


@app.command("status")
@_guarded
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
    target = _require_dsn(dsn)
    with ScheduleAdmin(target) as admin:
        report = admin.status(lease_ms=lease_ms)
    with HistoryReader(target) as reader:
        counts = reader.attempt_counts()
    if as_json:
        _print_json({**report.model_dump(mode="json"), "attempts": counts.model_dump(mode="json")})
    else:
        status_text(report)
        typer.echo(attempts_line(counts))


@runs_app.command("list")
@_guarded
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
    with HistoryReader(_require_dsn(dsn)) as reader:
        runs = reader.recent_runs(schedule=schedule, state=state, limit=limit)
    if as_json:
        _print_json([run.model_dump(mode="json") for run in runs])
    else:
        print_table(runs_table(runs))


@app.command("worker")
@_guarded
def worker_command(  # one flag per setting
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", help="A ql3_worker_ingress login; or QL3_WORKER_DSN/QL3_DSN."),
    ] = None,
    worker_id: Annotated[str | None, typer.Option("--worker-id")] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Attempts run at once (default 4).")
    ] = None,
    lease_ms: Annotated[
        int | None, typer.Option("--lease-ms", help="Lease by the database clock (default 30000).")
    ] = None,
    poll_interval_ms: Annotated[int | None, typer.Option("--poll-interval-ms")] = None,
    grace_ms: Annotated[
        int | None,
        typer.Option("--grace-ms", help="On SIGTERM, how long running attempts may finish."),
    ] = None,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port")] = None,
    log_format: Annotated[LogFormat | None, typer.Option("--log-format")] = None,
    log_level: Annotated[str | None, typer.Option("--log-level")] = None,
    clock: Annotated[str | None, typer.Option("--clock", hidden=True)] = None,
) -> None:
    """Run admitted attempts until SIGTERM/SIGINT (then finish or release them and exit 0).

    Takes queued attempts of command tasks (SKIP LOCKED), runs each with /bin/sh -c in its own
    process group, keeps its lease alive by the database clock, kills it at its timeout and
    records how it ended; a failure is retried after the task's backoff until max_attempts.
    Every setting is also read from QL3_WORKER_<NAME> (QL3_WORKER_CONCURRENCY, ...).
    """
    settings = load_worker_settings(
        dsn=dsn,
        id=worker_id,
        concurrency=concurrency,
        lease_ms=lease_ms,
        poll_interval_ms=poll_interval_ms,
        grace_ms=grace_ms,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
        clock=clock,
    )
    if settings.dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_WORKER_DSN or QL3_DSN"
        raise ConfigurationError(msg)
    configure_logging(settings.log_format, level=settings.log_level, owner_id=settings.id)
    worker = Worker(settings)
    worker.install_signal_handlers()
    try:
        code = worker.run()
    except SchemaMismatchError as exc:
        logger.error("schema mismatch: %s", exc, extra={"event": "worker.schema_mismatch"})  # noqa: TRY400  # one line, no traceback
        raise
    raise typer.Exit(code)


@app.command("verify")
@_guarded
def verify_command(
    since_ms: Annotated[int | None, typer.Option("--since-ms", help="Only runs from here.")] = None,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Check the admitted history; exit 1 with one line per violation (read-only, ql3_admin).

    A quarantined schedule (state invalid) is a violation (`invalid_schedule`): it admits
    nothing until an operator fixes, resumes or retires it.
    """
    report = verify_history(_require_dsn(dsn), since_ms=since_ms)
    if as_json:
        _print_json(report.model_dump(mode="json"))
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
    if not report.ok:
        raise typer.Exit(EXIT_FAILURE)


@app.command("demo")
@_guarded
def demo_command(
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=16)] = 3,
    seconds: Annotated[float, typer.Option("--seconds", min=2, max=3_600)] = 20,
    schedules: Annotated[int, typer.Option("--schedules", min=1, max=10_000)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="QL3_DSN",
            help="Use this database instead of a private one (a scratch one: the demo's"
            " replicas and worker act on every schedule and command task in it).",
        ),
    ] = None,
) -> None:
    """Start a private PostgreSQL, run replicas and a worker, SIGKILL a replica, judge it all."""
    if not as_json:
        configure_logging(LogFormat.TEXT, level="WARNING")
    try:
        verdict = run_demo(
            DemoOptions(
                replicas=replicas, seconds=seconds, schedules=schedules, as_json=as_json, dsn=dsn
            )
        )
    except KeyboardInterrupt:
        raise _fail(
            EXIT_INTERRUPTED, "demo interrupted; everything it started is stopped"
        ) from None
    if not verdict.ok:
        raise typer.Exit(EXIT_FAILURE)


def main() -> None:
    """Entry point of the `ql3` console script: every error is one `ql3: error:` line."""
    try:
        code = app(standalone_mode=False)
    except Exception as exc:  # noqa: BLE001  # the promise: one line, never a traceback
        sys.exit(_report_unhandled(exc))
    sys.exit(code if isinstance(code, int) else 0)


def _report_unhandled(exc: Exception) -> int:
    """Print a usage error (click's, re-raised by typer) or an unexpected error as one line."""
    exit_code = getattr(exc, "exit_code", None)
    format_message = getattr(exc, "format_message", None)
    if isinstance(exit_code, int) and callable(format_message):
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A command group without a sub-command: show its help, as click would.
            sys.stderr.write(f"{format_message()}\n")
            return exit_code
        # Usage errors: bad flag, bad choice, missing argument (click's UsageError, exit 2).
        _fail(exit_code, f"{format_message()} (see `ql3 --help`)")
        return exit_code
    logger.debug("unexpected error", exc_info=exc)
    _fail(EXIT_FAILURE, f"unexpected {type(exc).__name__}: {exc}")
    return EXIT_FAILURE
