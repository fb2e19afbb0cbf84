"""A primary whose COMMITs wait for a synchronous standby, and the ways tests end that wait.

With the standby stopped, every COMMIT on the primary waits for it; another session cancels
the wait (`pg_cancel_backend`), and PostgreSQL answers the COMMIT with *success* and the WARNING
`canceling wait for synchronous replication due to user request`: the write is on the primary
only. Dropping the standby requirement (a reload) lets commits, and the durability barrier,
pass again.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import TYPE_CHECKING, TypeVar

from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ql3_testkit import Ql3Database

_T = TypeVar("_T")
WAITING_SQL = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND usename = %s"


@contextlib.contextmanager
def sync_primary(prefix: str) -> Iterator[tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database]]:
    """Yield a primary with a synchronous standby, the standby, and a QL3 database on it."""
    with ThrowawayCluster(name=prefix) as primary:
        standby = primary.create_standby(synchronous=True)
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        database = prepare_ql3_database(primary, name)
        try:
            yield primary, standby, database
        finally:
            drop_standby_requirement(primary)  # else the drop would wait for the stopped standby
            drop_database(primary, name)


def cancel_sync_waits(primary: ThrowawayCluster, user: str) -> int:
    """Cancel every wait for the standby of `user`'s sessions; return how many."""
    with primary.connect() as conn:
        pids = [row[0] for row in conn.execute(WAITING_SQL, (user,)).fetchall()]
        for pid in pids:
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
    return len(pids)


def drop_standby_requirement(primary: ThrowawayCluster) -> None:
    """Let commits stop waiting for a synchronous standby (reload)."""
    with primary.connect() as conn:
        conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        conn.execute("SELECT pg_reload_conf()")


def retry_until(call: Callable[[], _T], errors: type[Exception], timeout_s: float = 20) -> _T:
    """Call until it stops raising `errors` (a reload taking effect); monotonic deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except errors:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
