"""Streaming replication for throwaway clusters: base backup, synchronous standby, promotion.

Used by `ThrowawayCluster.create_standby` / `promote` / `timeline`; kept apart so the cluster
module stays about one server's life cycle.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from psycopg import sql

from ._ddl import ddl
from ._errors import ThrowawayClusterError
from ._processes import run_tool

if TYPE_CHECKING:
    from pathlib import Path

    from ._throwaway import ThrowawayCluster

__all__ = [
    "base_backup",
    "in_recovery",
    "make_synchronous",
    "promote",
    "timeline",
    "wait_streaming",
]

_TIMEOUT_S = 60.0


def base_backup(primary: ThrowawayCluster, standby: ThrowawayCluster, *, no_sync: bool) -> None:
    """Clone `primary` into `standby.data_dir` with `pg_basebackup -R` and a physical slot.

    The slot and the application name are the standby's name, so `wait_streaming` and
    synchronous_standby_names can refer to it.
    """
    argv = [
        str(standby.bin_dir / "pg_basebackup"),
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
    run_tool(argv, cwd=standby.base_dir, os_user=standby.os_user)
    _forget_primary_only_settings(standby.data_dir)


def _forget_primary_only_settings(data_dir: Path) -> None:
    # A copied synchronous_standby_names would make the promoted standby wait forever.
    auto = data_dir / "postgresql.auto.conf"
    lines = auto.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("synchronous_standby_names")]
    auto.write_text("".join(kept), encoding="utf-8")


def make_synchronous(primary: ThrowawayCluster, name: str) -> None:
    """Make standby `name` the primary's synchronous standby; commits then wait for it."""
    with primary.connect() as conn:
        conn.execute(sql.SQL(ddl("cluster_set_synchronous")).format(names=sql.Literal(name)))
        conn.execute(ddl("cluster_synchronous_commit_on"))
        conn.execute(ddl("cluster_reload"))


def wait_streaming(primary: ThrowawayCluster, name: str, *, synchronous: bool) -> None:
    """Poll pg_stat_replication on the primary until standby `name` streams (and is sync)."""
    deadline = time.monotonic() + _TIMEOUT_S
    with primary.connect() as conn:
        while True:
            row = conn.execute(ddl("cluster_standby_state"), {"name": name}).fetchone()
            if row and row[0] == "streaming" and (not synchronous or row[1] == "sync"):
                return
            if time.monotonic() > deadline:
                raise ThrowawayClusterError(
                    f"standby {name!r} not streaming after {_TIMEOUT_S:.0f} s (state {row})"
                )
            time.sleep(0.05)


def in_recovery(cluster: ThrowawayCluster) -> bool:
    """Tell whether the server is a standby (in recovery)."""
    with cluster.connect() as conn:
        row = conn.execute(ddl("cluster_in_recovery")).fetchone()
    return bool(row and row[0])


def promote(cluster: ThrowawayCluster) -> None:
    """Promote a standby with `pg_ctl promote` and wait until it accepts writes."""
    argv = [str(cluster.bin_dir / "pg_ctl"), "promote", "-w", "-D", str(cluster.data_dir)]
    run_tool(argv, cwd=cluster.base_dir, os_user=cluster.os_user)
    deadline = time.monotonic() + _TIMEOUT_S
    while in_recovery(cluster):
        if time.monotonic() > deadline:
            raise ThrowawayClusterError(f"cluster {cluster.name!r}: promotion did not finish")
        time.sleep(0.05)


def timeline(cluster: ThrowawayCluster) -> int:
    """Read the current timeline: from the WAL file name, or the last checkpoint in recovery."""
    with cluster.connect() as conn:
        recovering = conn.execute(ddl("cluster_in_recovery")).fetchone()
        if recovering and recovering[0]:
            row = conn.execute(ddl("cluster_timeline_standby")).fetchone()
            return int(row[0]) if row else 0
        row = conn.execute(ddl("cluster_timeline_primary")).fetchone()
    if row is None:
        raise ThrowawayClusterError(f"cluster {cluster.name!r}: no WAL file name")
    # pg_walfile_name: 8 hex digits of timeline, then log and segment numbers.
    return int(str(row[0])[:8], 16)
