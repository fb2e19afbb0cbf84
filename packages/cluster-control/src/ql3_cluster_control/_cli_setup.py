"""`ql3 migrate`, `ql3 roles provision`, `ql3 zone-rules show|adopt`: readying a database."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

import typer
from ql3_cluster_postgres import (
    adopt_zone_rules,
    migrate,
    provision_roles,
    provision_roles_if_missing,
    read_zone_rules,
    record_zone_rules,
)
from ql3_runtime_core import zone_rules_version

from ._cli_common import AsJson, Dsn, guarded, print_json, require_dsn
from ._time_text import format_ms

__all__ = ["migrate_command", "roles_provision", "zone_rules_adopt", "zone_rules_show"]


@guarded
def migrate_command(dsn: Dsn = None) -> None:
    """Apply pending schema migrations; run it as the schema owner (a ql3_owner login).

    Run as a superuser on a database without the QL3 roles or schema, it provisions them first
    (as `ql3 roles provision`) and prints each step, so a fresh database takes one command. Also
    records this node's zone rules (tzdata) version when none is recorded yet; an existing
    record is kept (switch it with `ql3 zone-rules adopt`).
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
    # After the migrations: the zone rules table exists only from schema 3 on.
    change = record_zone_rules(target)
    local = zone_rules_version()
    if change.previous is None:
        typer.echo(f"recorded zone rules tzdata {change.current.version} (this node's)")
    elif change.current.version == local:
        typer.echo(f"zone rules tzdata {local} already recorded (this node's)")
    else:
        # Not an error: an upgraded node migrating a database others still run is normal; the
        # operator adopts the new rules once every replica has them.
        typer.echo(
            f"zone rules: the database records tzdata {change.current.version}, this node has"
            f" {local}; replicas with {local} claim nothing until `ql3 zone-rules adopt`"
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
    """Show the recorded zone rules version and this node's; replicas claim only if they agree."""
    record = read_zone_rules(require_dsn(dsn))
    local = zone_rules_version()
    recorded = None if record is None else record.version
    if as_json:
        print_json(
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


@guarded
def zone_rules_adopt(dsn: Dsn = None) -> None:
    """Make this node's zone rules the recorded ones, atomically for every replica (ql3_admin).

    From then on only replicas with this node's tzdata version claim; claims taken under the old
    rules can no longer commit. Run it once the upgraded replicas are deployed.
    """
    change = adopt_zone_rules(require_dsn(dsn))
    if not change.changed:
        typer.echo(f"zone rules already tzdata {change.current.version}; nothing changed")
        return
    typer.echo(
        f"zone rules: tzdata {change.previous or 'none'} -> {change.current.version}"
        f" ({change.fenced_claims} claims taken under the old rules fenced)"
    )
