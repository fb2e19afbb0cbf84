"""Streaming replication between private servers: base backup, synchronous standby, promotion.

Used by `ThrowawayCluster.create_standby` / `promote` / `timeline`; kept apart so the cluster
module stays about one server's life cycle. Every function takes the product's `PrivateServer`
(which a `ThrowawayCluster` is), so this module needs nothing from the cluster module and the
cluster module imports it one way only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from psycopg import sql
from psycopg.rows import dict_row

from ._errors import ThrowawayClusterError
from ._sql import statement

if TYPE_CHECKING:
    from pathlib import Path

    import psycopg
    from ql3_cluster_postgres import PrivateServer

__all__ = [
    "base_backup",
    "in_recovery",
    "make_synchronous",
    "promote",
    "timeline",
    "wait_streaming",
]

_TIMEOUT_S = 60.0


def base_backup(primary: PrivateServer, standby: PrivateServer, *, no_sync: bool) -> None:
    """Clone `primary` into `standby.data_dir` with `pg_basebackup -R` and a physical slot.

    The slot and the application name are the standby's name, so `wait_streaming` and
    synchronous_standby_names can refer to it.
    """
    # The product's lookup asks only for what an embedded server runs; a standby needs more.
    if not (standby.bin_dir / "pg_basebackup").exists():
        raise ThrowawayClusterError(
            f"{standby.bin_dir} has no pg_basebackup, which a standby is cloned with: install the"
            " PostgreSQL client tools of the same major version (Debian: postgresql-client-NN)"
        )
    argv = [
        "-D",
        str(standby.data_dir),
        "-d",
        primary.dsn("postgres", application_name=standby.name),
        "-X",
        "stream",
        "-R",  # standby.signal + primary_conninfo (with the password) in postgresql.auto.conf
        "-C",
        "-S",
        standby.name,
        "-c",
        "fast",
    ]
    if no_sync:
        argv.append("--no-sync")
    standby.run_tool("pg_basebackup", *argv)
    _forget_primary_only_settings(standby.data_dir)


def _forget_primary_only_settings(data_dir: Path) -> None:
    # A copied synchronous_standby_names would make the promoted standby wait forever.
    auto = data_dir / "postgresql.auto.conf"
    lines = auto.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("synchronous_standby_names")]
    auto.write_text("".join(kept), encoding="utf-8")


def make_synchronous(primary: PrivateServer, name: str) -> None:
    """Make standby `name` the primary's synchronous standby; commits then wait for it."""
    with primary.connect() as conn:
        conn.execute(sql.SQL(statement("cluster_set_synchronous")).format(names=sql.Literal(name)))
        conn.execute(statement("cluster_synchronous_commit_on"))
        conn.execute(statement("cluster_reload"))


def wait_streaming(primary: PrivateServer, name: str, *, synchronous: bool) -> None:
    """Poll pg_stat_replication on the primary until standby `name` streams (and is sync)."""
    deadline = time.monotonic() + _TIMEOUT_S
    with primary.connect() as conn:
        cursor = conn.cursor(row_factory=dict_row)
        while True:
            row = cursor.execute(statement("cluster_standby_state"), {"name": name}).fetchone()
            if (
                row is not None
                and row["state"] == "streaming"
                and (not synchronous or row["sync_state"] == "sync")
            ):
                return
            if time.monotonic() > deadline:
                raise ThrowawayClusterError(
                    f"standby {name!r} not streaming after {_TIMEOUT_S:.0f} s (state {row})"
                )
            time.sleep(0.05)


def in_recovery(cluster: PrivateServer) -> bool:
    """Tell whether the server is a standby (in recovery)."""
    with cluster.connect() as conn:
        return bool(_value(conn, "cluster_in_recovery", "in_recovery"))


def _value(conn: psycopg.Connection[Any], name: str, column: str) -> object:
    """Run statement `name` and return its first row's `column` (None without a row)."""
    row = conn.cursor(row_factory=dict_row).execute(statement(name)).fetchone()
    return None if row is None else row[column]


def promote(cluster: PrivateServer) -> None:
    """Promote a standby with `pg_ctl promote` and wait until it accepts writes."""
    cluster.run_tool("pg_ctl", "promote", "-w", "-D", str(cluster.data_dir))
    deadline = time.monotonic() + _TIMEOUT_S
    while in_recovery(cluster):
        if time.monotonic() > deadline:
            raise ThrowawayClusterError(f"cluster {cluster.name!r}: promotion did not finish")
        time.sleep(0.05)


def timeline(cluster: PrivateServer) -> int:
    """Read the current timeline: from the WAL file name, or the last checkpoint in recovery."""
    with cluster.connect() as conn:
        if _value(conn, "cluster_in_recovery", "in_recovery"):
            checkpoint_timeline = _value(conn, "cluster_timeline_standby", "timeline_id")
            return int(str(checkpoint_timeline)) if checkpoint_timeline is not None else 0
        wal_file = _value(conn, "cluster_timeline_primary", "wal_file")
    if wal_file is None:
        raise ThrowawayClusterError(f"cluster {cluster.name!r}: no WAL file name")
    # pg_walfile_name: 8 hex digits of timeline, then log and segment numbers.
    return int(str(wal_file)[:8], 16)
