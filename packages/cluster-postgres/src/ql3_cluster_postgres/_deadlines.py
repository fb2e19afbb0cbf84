"""Client-side deadlines: a connection that does not answer in time is cut from the client.

A server that stops answering without resetting the connection (a partition dropping packets, a
middlebox that acknowledges and then holds the bytes) leaves a client blocked in its socket read.
TCP keepalives and `tcp_user_timeout` end that only after seconds, and not at all when something
in between keeps acknowledging; the server's `statement_timeout` cannot help when the server is
out of reach. So each call arms a deadline on one watchdog thread, measured with
`time.monotonic()`. At the deadline the watchdog shuts the connection's socket down in both
directions, which wakes the blocked call at once with a connection error; the connection is
broken from then on and its pool discards it. A call that ends in time disarms its deadline
first, under the watchdog's lock, so a connection handed back to its pool is never cut.

Arming wakes the watchdog only when the new deadline is earlier than the moment it will look
anyway: every call arms one, and waking a thread per call (a context switch each) was a sixth of a
busy worker's own CPU time; calls that all last the same few seconds almost never need it.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    import psycopg

__all__ = ["Watchdog"]


@dataclass(eq=False)
class Deadline:
    """One armed deadline: `fired` tells afterwards whether the watchdog cut the connection."""

    at: float
    seconds: float
    conn: psycopg.Connection[Any] = field(repr=False)
    fired: bool = False


class Watchdog:
    """Cuts the connections of calls that outlive their deadline (one daemon thread, lazily)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._armed: set[Deadline] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # When the watchdog looks next (monotonic; infinity: only when woken).
        self._wake_at = math.inf

    @contextlib.contextmanager
    def deadline(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[Deadline]:
        """Cut `conn` if the block still runs `seconds` from now; disarm when it ends."""
        armed = Deadline(at=time.monotonic() + seconds, seconds=seconds, conn=conn)
        with self._changed:
            self._start()
            self._armed.add(armed)
            if armed.at < self._wake_at:
                self._changed.notify()
        try:
            yield armed
        finally:
            with self._changed:
                self._armed.discard(armed)

    def close(self) -> None:
        """Stop the thread; deadlines armed later start it again."""
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._closed = False
            self._wake_at = math.inf
            self._thread = threading.Thread(target=self._watch, name=self._name, daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        with self._changed:
            while not self._closed:
                now = time.monotonic()
                for overdue in [d for d in self._armed if d.at <= now]:
                    # Under the lock: the call cannot disarm (and hand its connection back to
                    # the pool) while its socket is being cut.
                    self._armed.discard(overdue)
                    overdue.fired = True
                    _cut(overdue.conn)
                earliest = min((d.at for d in self._armed), default=None)
                self._wake_at = math.inf if earliest is None else earliest
                self._changed.wait(None if earliest is None else max(earliest - now, 0.0))


def _cut(conn: psycopg.Connection[Any]) -> None:
    """Shut down both directions of the connection's socket; whoever waits on it wakes up."""
    with contextlib.suppress(Exception):  # already closed: nothing is waiting on it
        duplicate = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()
