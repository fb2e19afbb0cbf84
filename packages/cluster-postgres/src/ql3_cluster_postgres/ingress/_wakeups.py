"""AttemptWakeups: one LISTEN connection telling a worker when attempts were queued.

Migration 0015 notifies `ql3_attempt_queued` once per transaction that inserted attempts. A
worker that waits here polls at once instead of at its next poll interval. The notification is a
hint, never the source of truth: what is takeable is decided by the take itself, and a worker
that was not listening (the connection just opened or was lost) finds everything by polling. So
`wait` also answers True right after it (re)connected, because whatever was queued while nobody
listened sent its notification to nobody.

The connection is made by the package's one factory (keepalives and `tcp_user_timeout`, so a
partitioned server is noticed in seconds); it only listens, in autocommit, and holds no
transaction open. `wait` blocks its caller's thread for at most the timeout it is given (plus a
connect, bounded by the connect timeout).
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    ConnectionSettings,
    close_quietly,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._send import send

__all__ = ["AttemptWakeups"]


class AttemptWakeups(Closing):
    """Wait for `ql3_attempt_queued` on one connection of role `ql3_worker_ingress`.

    Args:
        conninfo: libpq connection string of a `ql3_worker_ingress` login.
        application_name: shown in `pg_stat_activity` (a worker's listener is its own session).
        connect_timeout_s: how long a connection attempt may take.

    """

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3-worker-listen",
        connect_timeout_s: float = 5.0,
    ) -> None:
        self._options = ConnectionOptions(
            conninfo,
            ConnectionSettings(
                application_name=application_name, connect_timeout_s=connect_timeout_s
            ),
        )
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` (monotonic) for a notification; True when a poll is worth it.

        True when attempts were queued, and right after the connection was (re)opened (what was
        queued while nobody listened notified nobody).

        Raises:
            RepositoryUnavailableError: the connection could not be opened or was lost; the
                next call connects again.

        """
        conn, opened = self._listening()
        if opened:
            return True
        try:
            for _ in conn.notifies(timeout=max(timeout_s, 0.0), stop_after=1):
                return True
        except psycopg.Error as exc:
            self._discard(conn)
            raise wrap_error(exc, "wakeups: wait for queued attempts") from exc
        return False

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection (None while not connected)."""
        conn = self._conn
        if conn is None or conn.closed:
            return None
        return int(conn.info.backend_pid)

    def close(self) -> None:
        """Close the listening connection; the next `wait` opens a new one."""
        with self._lock:
            close_quietly(self._conn)
            self._conn = None

    def _listening(self) -> tuple[psycopg.Connection[Any], bool]:
        """Return the listening connection and whether it was opened just now."""
        with self._lock:
            conn = reuse_or_connect(self._conn, self._options, "wakeups: connect")
            if conn is self._conn:
                return conn, False
            self._conn = conn
        try:
            send(conn, "listen_attempt_queued")
        except psycopg.Error as exc:
            self._discard(conn)
            raise wrap_error(exc, "wakeups: listen") from exc
        return conn, True

    def _discard(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            close_quietly(conn)
            if self._conn is conn:
                self._conn = None
