"""The `ql3` command line (typer): schema, roles, schedules, replicas, workers, status, history.

Commands: migrate, roles, schedule, zone-rules, run (a Coordinator replica), worker (DESIGN §10),
status, runs, verify, demo, web (the console).

This module is the map of the command line: it builds the `app`, registers every verb in the
order `ql3 --help` lists them, and turns anything that escapes a verb into one line (`main`).
The verbs live by group: `_setup` (migrate, roles, zone-rules), `_schedule`, `_trigger`
(schedule trigger), `_backfill` (schedule backfill),
`_daemons` (run, worker), `_history` (status, runs, verify), `_demo`, `_web`; what they share
(exit codes, `--dsn`, one-line errors) is in `_common`, the tables in `_tables`.
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

import logging
import sys
from importlib.metadata import version as distribution_version
from typing import Annotated

import typer
from ql3_runtime_core import log_event, zone_rules_version

from ql3_cluster_control._config import check_environment

from ._alerts import alerts_list
from ._backfill import schedule_backfill
from ._common import EXIT_FAILURE, fail, guarded
from ._daemons import run_command, worker_command
from ._demo import demo_command
from ._history import runs_list, status_command, verify_command
from ._pause import schedule_pause, schedule_pauses, schedule_resume
from ._prune import history_prune
from ._roles import roles_login
from ._schedule import (
    schedule_add,
    schedule_apply,
    schedule_list,
    schedule_preview,
    schedule_retire,
)
from ._setup import migrate_command, roles_provision, zone_rules_adopt, zone_rules_show
from ._trigger import schedule_trigger
from ._web import web_command

__all__ = ["app", "main"]

logger = logging.getLogger(__name__)

app = typer.Typer(
    name="ql3",
    help="QL3: cron admission exactly once, on time, with PostgreSQL's clock as the only clock.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)
schedule_app = typer.Typer(help="Manage schedules (runs as ql3_admin).", no_args_is_help=True)
roles_app = typer.Typer(
    help="Provision the least-privilege roles and their login users.", no_args_is_help=True
)
zone_rules_app = typer.Typer(
    help="The zone rules (tzdata) version every replica must decide with.", no_args_is_help=True
)
runs_app = typer.Typer(
    help="Admitted runs and their attempts (read as ql3_admin).", no_args_is_help=True
)
app.add_typer(schedule_app, name="schedule")
history_app = typer.Typer(
    help="Retention: prune old history, leaving checkpoints (runs as ql3_admin).",
    no_args_is_help=True,
)
app.add_typer(runs_app, name="runs")
app.add_typer(history_app, name="history")
app.add_typer(roles_app, name="roles")
app.add_typer(zone_rules_app, name="zone-rules")
alerts_app = typer.Typer(
    help="Alerts recorded by the database and their delivery (read as ql3_admin).",
    no_args_is_help=True,
)
app.add_typer(alerts_app, name="alerts")


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
@guarded
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


# Registered in the order `ql3 --help` lists them (typer keeps the order of registration).
app.command("migrate")(migrate_command)
roles_app.command("provision")(roles_provision)
roles_app.command("login")(roles_login)
zone_rules_app.command("show")(zone_rules_show)
zone_rules_app.command("adopt")(zone_rules_adopt)
schedule_app.command("add")(schedule_add)
schedule_app.command("list")(schedule_list)
schedule_app.command("pause")(schedule_pause)
schedule_app.command("resume")(schedule_resume)
schedule_app.command("pauses")(schedule_pauses)
schedule_app.command("retire")(schedule_retire)
schedule_app.command("trigger")(schedule_trigger)
schedule_app.command("backfill")(schedule_backfill)
schedule_app.command("apply")(schedule_apply)
schedule_app.command("preview")(schedule_preview)
app.command("run")(run_command)
app.command("status")(status_command)
runs_app.command("list")(runs_list)
alerts_app.command("list")(alerts_list)
app.command("worker")(worker_command)
app.command("verify")(verify_command)
history_app.command("prune")(history_prune)
app.command("demo")(demo_command)
app.command("web")(web_command)


def main() -> None:
    """Entry point of the `ql3` console script: every error is one `ql3: error:` line."""
    # standalone_mode=False: click hands errors back instead of printing its own multi-line
    # usage text and exiting, so every error passes through `_report_unhandled`.
    try:
        code = app(standalone_mode=False)
    except Exception as exc:  # noqa: BLE001  # the promise: one line, never a traceback
        sys.exit(_report_unhandled(exc))
    sys.exit(code if isinstance(code, int) else 0)


def _report_unhandled(exc: Exception) -> int:
    """Print a usage error (click's, re-raised by typer) or an unexpected error as one line."""
    # Duck-typed: click's exceptions carry both, and typer re-raises them under its own names.
    exit_code = getattr(exc, "exit_code", None)
    format_message = getattr(exc, "format_message", None)
    if isinstance(exit_code, int) and callable(format_message):
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A command group without a sub-command: show its help, as click would.
            sys.stderr.write(f"{format_message()}\n")
            return exit_code
        # Usage errors: bad flag, bad choice, missing argument (click's UsageError, exit 2).
        fail(exit_code, f"{format_message()} (see `ql3 --help`)")
        return exit_code
    # A bug, not a user error: the traceback goes to the DEBUG log, the promise stays one line.
    log_event(logger, logging.DEBUG, "cli.unexpected_error", exc_info=exc)
    fail(EXIT_FAILURE, f"unexpected {type(exc).__name__}: {exc}")
    return EXIT_FAILURE
