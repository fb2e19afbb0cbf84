"""`ql3 migrate`, `ql3 roles provision`, `ql3 zone-rules show|adopt`: readying a database."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from ql3_cluster_postgres import (
    adopt_zone_rules,
    migrate,
    provision_roles,
    provision_roles_if_missing,
    read_zone_rule_history,
    read_zone_rules,
    record_zone_rules,
)
from ql3_runtime_core import zone_rules_version

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._time_text import format_ms

if TYPE_CHECKING:
    from ql3_cluster_postgres import ZoneMove, ZoneRulesChange, ZoneRuleVersion

__all__ = ["migrate_command", "roles_provision", "zone_rules_adopt", "zone_rules_show"]


@guarded
def migrate_command(dsn: Dsn = None) -> None:
    """Apply pending schema migrations; run it as the schema owner (a ql3_owner login).

    Run as a superuser on a database without the QL3 roles or schema, it provisions them first
    (as `ql3 roles provision`) and prints each step, so a fresh database takes one command. Also
    records this node's zone rules (tzdata) version when none is recorded yet, and stores this
    node's rule data for its version when the database knows that version without its data; an
    existing record is kept (switch it with `ql3 zone-rules adopt`).
    """
    target = require_dsn(dsn)
    for step in provision_roles_if_missing(target):
        typer.echo(f"provisioned: {step}")
    applied = migrate(target)
    if applied:
        for name in applied:
            typer.echo(f"applied {name}")
    else:
        typer.echo("schema is up to date")
    # After the migrations: the zone rules tables exist only from schema 3 (and 6) on.
    change = record_zone_rules(target)
    local = zone_rules_version()
    recorded = change.current.version
    if change.previous is None:
        typer.echo(f"recorded zone rules tzdata {recorded} (this node's)")
    elif recorded == local:
        typer.echo(f"zone rules tzdata {local} already recorded (this node's)")
    if change.stored_zones:
        typer.echo(f"stored the rule data of tzdata {local} ({change.stored_zones} zones)")
    if recorded != local and not _stored(read_zone_rule_history(target), recorded):
        # Not a failure of the migration: an operator settles it with one adopt.
        typer.echo(
            f"zone rules: the database records tzdata {recorded} but holds no rule data for it"
            f" (this node has {local}); replicas claim nothing until `ql3 zone-rules adopt` runs"
            f" from a node with tzdata {recorded} (stores its rules) or {local} (switches to it)"
        )
    elif recorded != local:
        typer.echo(
            f"zone rules: the database records tzdata {recorded} (stored), this node has {local};"
            f" every replica decides with {recorded} until `ql3 zone-rules adopt`"
        )


@guarded
def roles_provision(dsn: Dsn = None) -> None:
    """Create the group roles ql3_owner, ql3_admin, ql3_runtime, ql3_worker_ingress and grants.

    Run as a superuser (a CREATEROLE login is not enough: provisioning resets role attributes
    such as NOSUPERUSER, which only a superuser may); idempotent. Prints one line per step.
    """
    for step in provision_roles(require_dsn(dsn)):
        typer.echo(step)


@guarded
def zone_rules_show(as_json: AsJson = False, dsn: Dsn = None) -> None:
    """Show the recorded zone rules, the versions in force before it (history) and this node's.

    Every replica decides with the recorded version, loaded from the database; this node's
    version matters only to what `adopt` run here would switch to.
    """
    target = require_dsn(dsn)
    record = read_zone_rules(target)
    history = read_zone_rule_history(target)
    local = zone_rules_version()
    if as_json:
        print_json(
            {
                "recorded": None if record is None else record.model_dump(mode="json"),
                "this_node": local,
                "history": [version.model_dump(mode="json") for version in history],
            }
        )
        return
    if record is None:
        typer.echo(f"recorded: none (run `ql3 migrate`); this node: tzdata {local}")
        return
    stored = _stored(history, record.version)
    data = "rule data stored" if stored else "NO RULE DATA STORED: replicas claim nothing"
    typer.echo(
        f"recorded: tzdata {record.version} (at {format_ms(record.recorded_at_ms)} by"
        f" {record.recorded_by}; {data}); this node: tzdata {local}"
    )
    for version in history:
        typer.echo(_history_line(version))


def _stored(history: list[ZoneRuleVersion], version: str) -> bool:
    """Tell whether the database stores the rule data of `version` (counted per version)."""
    return any(entry.version == version and entry.zones > 0 for entry in history)


def _history_line(version: ZoneRuleVersion) -> str:
    until = format_ms(version.superseded_at_ms) if version.superseded_at_ms else "now"
    zones = f"{version.zones} zones stored" if version.zones else "rule data not stored"
    return (
        f"  tzdata {version.version}: in force from {format_ms(version.took_effect_at_ms)} to"
        f" {until} (by {version.recorded_by}; {zones})"
    )


@guarded
def zone_rules_adopt(
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="List what would move; lock nothing, change nothing."),
    ] = False,
    dsn: Dsn = None,
) -> None:
    """Make this node's zone rules the recorded ones, in one transaction (ql3_admin).

    Stores this node's rule data for its version, moves the cursor of every schedule whose zone's
    rules differ (what the old rules had due and nobody decided becomes a skip record of reason
    zone_rules_changed, naming both versions), records the switch in the version history and
    fences claims taken under the old rules. Every replica follows at once.
    """
    change = adopt_zone_rules(require_dsn(dsn), dry_run=dry_run)
    if not change.changed:
        typer.echo(f"zone rules already tzdata {change.current.version}; nothing changed")
        if change.stored_zones:
            typer.echo(f"stored its rule data ({change.stored_zones} zones)")
        return
    for line in adopt_lines(change):
        typer.echo(line)


def adopt_lines(change: ZoneRulesChange) -> list[str]:
    """Describe an adopt (or a dry run): the switch, the zones that changed, each move."""
    verb = "would switch" if change.dry_run else "switched"
    lines = [
        f"zone rules: {verb} tzdata {change.previous or 'none'} -> {change.current.version}"
        f" at {format_ms(change.current.recorded_at_ms)}"
        + (
            ""
            if change.dry_run
            else f" ({change.fenced_claims} claims taken under the old rules fenced)"
        )
    ]
    if not change.old_rules_known:
        lines.append(
            f"the rule data of tzdata {change.previous} is not stored: every zone counts as"
            " changed, cursors move to the new rules' first occurrence at or after them"
        )
    zones = ", ".join(change.changed_zones) or "none"
    moved = [move for move in change.moves if move.moved or move.skipped_count]
    lines.append(f"zones whose rules changed: {zones}; schedules moved: {len(moved)}")
    lines.extend(_move_line(move) for move in moved)
    return lines


def _move_line(move: ZoneMove) -> str:
    skipped = ""
    if move.skipped_count:
        skipped = (
            f"; {move.skipped_count} occurrence(s) due under the old rules skipped"
            f" ({format_ms(move.skipped_first_ms)} .. {format_ms(move.skipped_last_ms)})"
        )
    after = format_ms(move.cursor_after_ms)
    state = "" if move.state_after is move.state_before else f" ({move.state_after.value})"
    return (
        f"  {move.name} ({move.timezone}): next due {format_ms(move.cursor_before_ms)} ->"
        f" {after}{state}{skipped}"
    )
