"""Commits acknowledged only with a WARNING, and the barrier that settles them (SPEC §7).

A COMMIT that waits for the synchronous standby and is cancelled (a client cancel, an operator's
`pg_cancel_backend`) answers *success* with the WARNING `canceling wait for synchronous
replication due to user request` (or `... and terminating connection due to administrator
command`, after which the connection closes): the transaction committed on this server only and
a failover can lose it (Patroni's pg_rewind removes it from the old primary). Such a commit is as
uncertain as one whose reply was lost, and is settled the same way, from durable facts.

Durable facts need a server whose commits reach the synchronous standby: `durability_barrier`
commits a transaction that writes WAL (a logical message) and requires a clean acknowledgement
(no WARNING within `timeout_s`, cancelled from the client otherwise). Every earlier commit on
that server's timeline is then durable where a failover looks for it; on an isolated old primary
the barrier never passes and the commit stays uncertain.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import RepositoryUnavailableError

from ._sql import query

if TYPE_CHECKING:
    from collections.abc import Iterator

    import psycopg
    from psycopg.errors import Diagnostic

__all__ = ["SYNC_REP_CANCEL_TEXTS", "collect_commit_warnings", "durability_barrier"]

# PostgreSQL's texts (syncrep.c); matched case-insensitively, and any other WARNING with SQLSTATE
# 01000 during COMMIT counts too, because a server with translated messages says it differently.
SYNC_REP_CANCEL_TEXTS = (
    "canceling wait for synchronous replication",
    "canceling the wait for synchronous replication",
)
_WARNING_SQLSTATE = "01000"


def is_uncertain_commit_notice(diag: Diagnostic) -> bool:
    """Tell whether a notice received during COMMIT makes its success uncertain."""
    if (diag.severity_nonlocalized or diag.severity) != "WARNING":
        return False
    text = (diag.message_primary or "").lower()
    return diag.sqlstate == _WARNING_SQLSTATE or any(t in text for t in SYNC_REP_CANCEL_TEXTS)


@contextlib.contextmanager
def collect_commit_warnings(conn: psycopg.Connection[Any]) -> Iterator[list[str]]:
    """Collect, while the block runs, the texts of notices that make a COMMIT uncertain."""
    found: list[str] = []

    def collect(diag: Diagnostic) -> None:
        if is_uncertain_commit_notice(diag):
            found.append(diag.message_primary or "WARNING during COMMIT")

    conn.add_notice_handler(collect)
    try:
        yield found
    finally:
        with contextlib.suppress(ValueError):  # already gone with a closed connection
            conn.remove_notice_handler(collect)


def durability_barrier(conn: psycopg.Connection[Any], timeout_s: float) -> None:
    """Commit a WAL-writing transaction on `conn` (autocommit) and require a clean answer.

    Raises:
        RepositoryUnavailableError: the commit was acknowledged only with a WARNING (or cancelled
            after `timeout_s` while it waited for the synchronous standby): this server cannot
            tell durable facts yet. psycopg errors propagate for the caller to wrap.

    """
    finished = threading.Event()

    def cancel() -> None:
        if not finished.is_set():
            conn.cancel_safe()

    timer = threading.Timer(timeout_s, cancel)
    with collect_commit_warnings(conn) as warnings:
        timer.start()
        try:
            conn.execute(query("durability_barrier"))
        finally:
            finished.set()
            timer.cancel()
    if warnings:
        msg = (
            "repository: durability barrier acknowledged only with a WARNING"
            f" ({warnings[0]}): no synchronous standby confirmed it within {timeout_s:g} s"
        )
        raise RepositoryUnavailableError(msg)
