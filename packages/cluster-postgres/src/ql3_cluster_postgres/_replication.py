"""The replication-safety guard's reading of a node (DESIGN §13), for the repository and admin.

One statement (`sql/read_replication_state.sql`) that any QL3 role may run: whether the node is
in recovery, its system identifier and timeline, its address, how many standbys stream from it
and whether this session's commits wait for a synchronous one. runtime-core's
`ReplicationState` turns that into a mode and a safe/unsafe verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import ReplicationState

from ._rows import ReplicationRow, named_row
from ._send import send

if TYPE_CHECKING:
    import psycopg

__all__ = ["read_replication_state"]

_ROW = named_row(ReplicationRow)


def read_replication_state(conn: psycopg.Connection[Any]) -> ReplicationState:
    """Read the node `conn` talks to; psycopg errors propagate (the caller wraps them)."""
    row = send(conn, "read_replication_state", rows=_ROW).fetchone()
    if row is None:  # pragma: no cover - the statement always returns one row
        msg = "read_replication_state returned no row"
        raise LookupError(msg)
    return ReplicationState(
        host=row.host,
        port=row.port,
        system_identifier=row.system_identifier,
        timeline=row.timeline,
        in_recovery=row.in_recovery,
        standbys=row.standbys,
        commits_wait_for_standby=row.commits_wait_for_standby,
        synchronous_standby_names=row.synchronous_standby_names,
        synchronous_commit=row.synchronous_commit,
        sync_standbys=row.sync_standbys,
    )
