"""A primary whose commits wait for a synchronous standby, and ways to end those waits.

Stopping the standby makes every COMMIT on the primary wait for it; ending that wait from another
session (`pg_cancel_backend`, `pg_terminate_backend`) makes PostgreSQL answer *success* with
`WARNING: canceling wait for synchronous replication ...`: the transaction is on the primary only.
Dropping the standby requirement (`synchronous_standby_names` reset) releases every wait cleanly.
Loaded as a pytest plugin by conftest.py (the `sync_primary` fixture).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

WAITING_SQL = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND usename = %s"
_ENDINGS = {
    "pg_cancel_backend": "SELECT pg_cancel_backend(%s)",
    "pg_terminate_backend": "SELECT pg_terminate_backend(%s)",
}


@pytest.fixture
def sync_primary() -> Iterator[tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database]]:
    """Yield a primary whose commits wait for a synchronous standby, the standby, a database."""
    with ThrowawayCluster(name="ql3sync") as primary:
        standby = primary.create_standby(synchronous=True)
        name = f"ql3_sync_{uuid.uuid4().hex[:8]}"
        database = prepare_ql3_database(primary, name)
        yield primary, standby, database
        drop_standby_requirement(primary)  # else the drop would wait for the stopped standby
        drop_database(primary, name)


def end_sync_waits(primary: ThrowawayCluster, user: str, how: str = "pg_cancel_backend") -> int:
    """End every wait for the standby of `user`'s sessions with `how`; return how many."""
    with primary.connect() as conn:
        pids = [row[0] for row in conn.execute(WAITING_SQL, (user,)).fetchall()]
        for pid in pids:
            conn.execute(_ENDINGS[how], (pid,))
    return len(pids)


def drop_standby_requirement(primary: ThrowawayCluster) -> None:
    """Stop requiring a synchronous standby: every waiting COMMIT returns, cleanly."""
    with primary.connect() as conn:
        conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        conn.execute("SELECT pg_reload_conf()")
