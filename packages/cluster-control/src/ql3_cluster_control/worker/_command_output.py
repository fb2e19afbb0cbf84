"""Watching one running command from its runner's thread: its output pipe and its exit.

A command runner used to hand the output pipe to a second thread and look for the shell's exit
on a timer (1 ms, then twice as late each time). Under a burst of short commands both cost the
worker: a thread hand-off per command (the GIL passed back and forth), and a command ended
between two looks held its slot until the next one. The runner now waits on both at once with
`poll(2)`: the pipe (its output is read as it comes) and, where the kernel has them (Linux 5.3
and later), a pidfd, which becomes readable when the shell exits. Without a pidfd the exit is
still looked for on the old timer.

The output still never blocks the runner: a grandchild that left the command's process group
may hold the pipe open after the shell exited. The runner reads what comes for at most
`READER_JOIN_S` after the exit, then leaves the pipe to a kept thread that reads it to its end
and closes it (closing it under a reader could hand its descriptor to another file while the
read goes on).
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import threading
import time
from typing import TYPE_CHECKING, Final

from ql3_runtime_core import OUTPUT_TAIL_MAX_CHARS

from ._threads import REUSED_THREADS

if TYPE_CHECKING:
    from typing import IO

__all__ = ["READER_JOIN_S", "CommandOutput", "output_tail"]

# A grandchild that left the group may keep the output pipe open: read what came, then go.
READER_JOIN_S: Final = 1.0
_CHUNK: Final = 65_536
_READABLE: Final = select.POLLIN | select.POLLHUP | select.POLLERR


def output_tail(data: bytes, limit: int = OUTPUT_TAIL_MAX_CHARS) -> str:
    """Return the last `limit` bytes as text: UTF-8, undecodable bytes and NUL as U+FFFD."""
    text = data[-limit:].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    return text[-limit:]


class _Tail:
    """The last `limit` bytes written to it (the output of one command), thread-safe."""

    def __init__(self, limit: int = OUTPUT_TAIL_MAX_CHARS) -> None:
        self._limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            if len(self._data) > self._limit:
                del self._data[: len(self._data) - self._limit]

    def text(self) -> str:
        with self._lock:
            return output_tail(bytes(self._data), self._limit)


def _drain(stream: IO[bytes], tail: _Tail) -> None:
    """Read what is left of a command's output until every writer closed it; close it."""
    try:
        with contextlib.suppress(OSError):
            while chunk := os.read(stream.fileno(), _CHUNK):
                tail.feed(chunk)
    finally:
        stream.close()


def _pidfd(pid: int) -> int | None:
    """Return a descriptor readable once `pid` exits; None where the kernel has none (< 5.3)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class CommandOutput:
    """One command's output pipe and exit, waited on together from the runner's own thread.

    `wait(timeout_s)` returns when output came, the shell exited or the time passed, keeping the
    output's tail; `finish()` after the shell was reaped reads what is left for at most
    `READER_JOIN_S` and returns the tail. `close()` releases the descriptors whatever happened.
    `name` is the reader thread's, should one be needed.
    """

    def __init__(self, pid: int, stream: IO[bytes], *, name: str) -> None:
        self._name = name
        self._stream: IO[bytes] | None = stream
        self._tail = _Tail()
        self._poll = select.poll()
        self._poll.register(stream.fileno(), _READABLE)
        self._pidfd = _pidfd(pid)
        if self._pidfd is not None:
            self._poll.register(self._pidfd, select.POLLIN)

    @property
    def sees_exit(self) -> bool:
        """Whether `wait` returns as soon as the shell exits (a pidfd is watched)."""
        return self._pidfd is not None

    def pipe_open(self) -> bool:
        """Whether the output pipe is still watched (some writer may still write to it)."""
        return self._stream is not None

    def wait(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for output or the exit; read the output that came."""
        for descriptor, _ in self._poll.poll(max(0, round(timeout_s * 1000))):
            if self._stream is not None and descriptor == self._stream.fileno():
                self._read()

    def finish(self) -> str:
        """After the reap: the rest of the output, for at most `READER_JOIN_S`; the tail."""
        if self._pidfd is not None:
            self._poll.unregister(self._pidfd)
        deadline = time.monotonic() + READER_JOIN_S
        while self._stream is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                # A grandchild holds the pipe: a kept thread reads it to its end and closes it.
                stream, self._stream = self._stream, None
                REUSED_THREADS.submit(self._name, functools.partial(_drain, stream, self._tail))
                break
            self.wait(left)
        return self._tail.text()

    def close(self) -> None:
        """Close the pidfd, and the pipe unless a reader thread owns it now."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _read(self) -> None:
        stream = self._stream
        if stream is None:  # pragma: no cover - only called while the pipe is watched
            return
        try:
            chunk = os.read(stream.fileno(), _CHUNK)
        except OSError:
            chunk = b""
        if chunk:
            self._tail.feed(chunk)
            return
        # End of output: every writer closed the pipe.
        self._poll.unregister(stream.fileno())
        stream.close()
        self._stream = None
