"""The sessions of the worker ingress: a pool, client-side deadlines, acknowledged writes.

`IngressSessions` is what `WorkerIngress` sends through. Every write is one statement (a call
of one `ql3` function) inside `acknowledged_write`; the hot ones (finish, renewal, abandonment,
alerts) are sent alone in autocommit: PostgreSQL commits such a statement before it answers, so
one round trip does what BEGIN, the statement and COMMIT did in three (each a wake-up of the
worker and of its backend: an eighth of a busy worker's interpreter time went to them). A
write whose answer was lost, or acknowledged only with the synchronous-replication cancel
WARNING (sent, like the rows, before the server says it is ready again), raises
`UncertainWriteError`, and its connection is closed so the pool replaces it (the next call may
reach a new primary).

A statement sent alone commits wherever it arrives, even after the client gave up on it: one
sent into a network partition runs when the network heals (TCP delivers it late), possibly
after the caller settled the call it thought lost. That is harmless for the hot writes: a
finish is settled by a finish that finds it recorded or is refused, a renewal confirms nothing
that was not answered, an abandonment decides by the database clock when it runs, an alert's
lease expires. It is not for the take: one landing after its settling would hold attempts no
worker runs until their lease ended, and use one of them up. So the take is `guarded`, and the
release too (rare, and the worker's log says what it released): BEGIN goes first, the statement
only once the server answered it, and COMMIT only once the rows came back, as every write was
sent before; a partition in between leaves an open transaction that ends with its connection.
`_settled` passes the durability barrier on a fresh, unpooled connection before reading what is
durable.

Every call has a client-side deadline: the sessions' `statement_timeout` + 1 s, measured with
`time.monotonic()` by one `Watchdog` thread, which shuts a late connection's socket down. The
sessions also run with that `idle_in_transaction_session_timeout` and `lock_timeout` (the
server's side of a call the client gave up on ends too) and `jit = off`. A pooled connection
that may be dead (its socket has input: the server closed it or said why it ends it) is checked
with an empty query, under the deadline, before it is handed out; a quiet one costs no round
trip.
"""

from __future__ import annotations

import contextlib
import select
import threading
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg
from psycopg.rows import dict_row
from ql3_runtime_core import RepositoryUnavailableError

from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    ConnectionSettings,
    close_quietly,
    connect,
    wrap_error,
)
from ql3_cluster_postgres._deadlines import Watchdog
from ql3_cluster_postgres._durability import UncertainWriteError, acknowledged_write, settle_durably
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._send import send

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = ["IngressSessions", "Row"]

Row = dict[str, Any]
_T = TypeVar("_T")


def _may_be_dead(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection is broken, or has input it should not have."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


# The client waits this much longer than the server's statement_timeout before it cuts the
# connection, so a reachable server ends a slow statement itself, with a clean error.
_CLIENT_MARGIN_S: Final = 1.0


class IngressSessions(Closing):
    """A pool of worker sessions with deadlines; writes acknowledged cleanly or uncertain."""

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3-worker",
        max_connections: int = 4,
        connect_timeout_s: float = 5.0,
        statement_timeout_ms: int = 5_000,
        durability_timeout_ms: int = 2_000,
    ) -> None:
        if max_connections < 1:
            msg = f"max_connections: must be >= 1, got {max_connections}"
            raise ValueError(msg)
        for name, value in (
            ("statement_timeout_ms", statement_timeout_ms),
            ("durability_timeout_ms", durability_timeout_ms),
        ):
            if value <= 0:
                msg = f"{name}: must be > 0, got {value}"
                raise ValueError(msg)
        self._options = ConnectionOptions(
            conninfo,
            ConnectionSettings(
                application_name=application_name, connect_timeout_s=connect_timeout_s
            ),
            server_settings={
                "jit": "off",
                "statement_timeout": str(statement_timeout_ms),
                "idle_in_transaction_session_timeout": str(statement_timeout_ms),
                "lock_timeout": str(statement_timeout_ms),
            },
        )
        self._statement_timeout_ms = statement_timeout_ms
        self._deadline_s = statement_timeout_ms / 1000 + _CLIENT_MARGIN_S
        self._durability_timeout_s = durability_timeout_ms / 1000
        self._watchdog = Watchdog(f"{application_name}-deadlines")
        # A worker process usually runs several executor threads; a small pool lets them take
        # and report attempts concurrently. Each connection that may be dead is checked (an
        # empty query, under the deadline) before it is handed out: after a server restart every
        # pooled connection is dead, and failing one call per dead connection would keep
        # heartbeats from confirming leases for seconds (`_check_connection`).
        self._pool = self._options.pool(
            max_size=max_connections, timeout_s=connect_timeout_s, check=self._check_connection
        )
        self._lock = threading.Lock()
        self._opened = False

    def close(self) -> None:
        """Close the pool and its connections."""
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False
        self._watchdog.close()

    # -- sending ----------------------------------------------------------------------------

    def _check_connection(self, conn: psycopg.Connection[Any]) -> None:
        """Probe a pooled connection that may be dead (an empty query under the deadline).

        An idle connection of this pool receives nothing (no LISTEN, no SET): when its socket
        has something to read, the server closed it or sent the error it ends sessions with (a
        restart, `pg_terminate_backend`), and the probe fails and the pool replaces it. A quiet
        socket needs no round trip; a connection silently cut since its last use fails its call
        like any call cut mid-way, under the same deadline.
        """
        if not _may_be_dead(conn):
            return
        with self._watchdog.deadline(conn, self._deadline_s):
            conn.execute("")

    @contextlib.contextmanager
    def _connection(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc

    @contextlib.contextmanager
    def _fresh_connection(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        """Open a new connection (not pooled): it reaches whichever server leads now."""
        conn = connect(self._options, action)
        try:
            yield conn
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc
        finally:
            close_quietly(conn)

    @contextlib.contextmanager
    def _deadline(
        self, conn: psycopg.Connection[Any], action: str, seconds: float | None = None
    ) -> Iterator[None]:
        """Cut `conn` when the block outlives the deadline, and say so in the error."""
        with self._watchdog.deadline(conn, seconds or self._deadline_s) as deadline:
            try:
                yield
            except (psycopg.Error, UncertainWriteError) as exc:
                if not deadline.fired:
                    raise
                detail = f"no answer within {deadline.seconds:g} s; the client cut the connection"
                if isinstance(exc, UncertainWriteError):
                    raise UncertainWriteError(action, "reply_lost", detail) from exc
                raise RepositoryUnavailableError(f"{action}: {detail}") from exc

    def _write_on(
        self,
        conn: psycopg.Connection[Any],
        name: str,
        params: Mapping[str, Any],
        action: str,
        *,
        guarded: bool = False,
    ) -> list[Row]:
        """Send `sql/<name>.sql`; its rows once its commit is clean.

        Alone in autocommit unless `guarded`: then BEGIN goes first and COMMIT only once the
        rows came back, so a statement sent into a network partition cannot commit on its own
        when the network heals, after the caller gave up on it (see the module's docstring).
        """
        block = conn.transaction() if guarded else contextlib.nullcontext()
        with self._deadline(conn, action):
            try:
                with (
                    acknowledged_write(conn, action),
                    block,
                    conn.cursor(row_factory=dict_row) as cur,
                ):
                    rows = send(cur, name, params).fetchall()
            except UncertainWriteError:
                close_quietly(conn)  # the pool replaces it: the next call may reach a new primary
                raise
        return rows

    def _write(
        self, name: str, params: Mapping[str, Any], action: str, *, guarded: bool = False
    ) -> list[Row]:
        with self._connection(action) as conn:
            return self._write_on(conn, name, params, action, guarded=guarded)

    def _read_on(
        self, conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any], action: str
    ) -> list[Row]:
        with self._deadline(conn, action), conn.cursor(row_factory=dict_row) as cur:
            return send(cur, name, params).fetchall()

    def _settled(self, action: str, read: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Pass the durability barrier on a fresh connection, then `read` what is durable."""
        with self._fresh_connection(action) as conn, self._deadline(conn, action):
            return settle_durably(conn, self._durability_timeout_s, read)
