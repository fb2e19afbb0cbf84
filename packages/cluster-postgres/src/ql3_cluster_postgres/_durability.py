"""Commits acknowledged only with a WARNING, and the barrier that settles them (DESIGN §6).

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

Every write path (the Coordinator's commit, worker ingress, admin edits, zone-rule adoption) goes
through the same two helpers: `acknowledged_write` turns a lost reply or a WARNING-only
acknowledgement into `UncertainWriteError`, and `settle_durably` passes the barrier on a fresh
connection before reading the durable facts that settle it.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import psycopg
from ql3_runtime_core import RepositoryUnavailableError

from ._connect import is_connection_lost
from ._send import send

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from psycopg.errors import Diagnostic

__all__ = [
    "SYNC_REP_CANCEL_TEXTS",
    "UncertainWriteError",
    "acknowledged_write",
    "collect_commit_warnings",
    "durability_barrier",
    "settle_durably",
]

_T = TypeVar("_T")

# Why a write is uncertain: its COMMIT reply never came, or came as success with the sync-rep
# cancel WARNING (committed on that server only). Log event names follow these words.
UncertainKind = Literal["reply_lost", "unsafe_ack"]

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


class UncertainWriteError(RepositoryUnavailableError):
    """A write whose fate is unknown: settle it from durable facts before acting on it.

    `kind` is `reply_lost` (the connection broke around COMMIT: it may or may not have landed)
    or `unsafe_ack` (acknowledged only with the sync-rep cancel WARNING: it landed on that
    server only, and a failover may lose it). Either way nothing the write returned may be
    trusted; the caller settles it with `settle_durably` on a fresh connection.
    """

    def __init__(self, action: str, kind: UncertainKind, detail: str) -> None:
        self.action = action
        self.kind = kind
        self.detail = detail
        what = "reply lost" if kind == "reply_lost" else "acknowledged only with a WARNING"
        super().__init__(f"{action}: uncertain ({what}: {detail}); settle it from durable facts")


@contextlib.contextmanager
def acknowledged_write(conn: psycopg.Connection[Any], action: str) -> Iterator[None]:
    """Require a clean acknowledgement of the commit that ends inside this block.

    Wrap the autocommit statement, or the whole `conn.transaction()` block, whose COMMIT may be
    lost or acknowledged with the sync-rep WARNING.

    Raises:
        UncertainWriteError: the connection broke in a way that may follow a durable commit
            (see `is_connection_lost`), or the commit answered success with the WARNING. Other
            psycopg errors propagate unchanged (the server said the write did not commit).

    """
    with collect_commit_warnings(conn) as warnings:
        try:
            yield
        except psycopg.Error as exc:
            if not is_connection_lost(exc):
                raise
            raise UncertainWriteError(action, "reply_lost", str(exc).strip()) from exc
    if warnings:
        raise UncertainWriteError(action, "unsafe_ack", warnings[0])


def settle_durably(
    conn: psycopg.Connection[Any],
    timeout_s: float,
    read: Callable[[psycopg.Connection[Any]], _T],
) -> _T:
    """Pass the durability barrier on `conn` (autocommit), then read durable facts with `read`.

    `conn` must be a connection opened after the uncertain write (it reaches whichever server
    leads now). Facts read after a clean barrier survive a failover, so what `read` finds is
    what the history will say.

    Raises:
        RepositoryUnavailableError: the barrier was not acknowledged cleanly; stay uncertain.

    """
    durability_barrier(conn, timeout_s)
    return read(conn)


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
            send(conn, "durability_barrier")
        finally:
            finished.set()
            timer.cancel()
    if warnings:
        msg = (
            "repository: durability barrier acknowledged only with a WARNING"
            f" ({warnings[0]}): no synchronous standby confirmed it within {timeout_s:g} s"
        )
        raise RepositoryUnavailableError(msg)
