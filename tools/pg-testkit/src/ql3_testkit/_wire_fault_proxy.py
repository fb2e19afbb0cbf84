"""A PostgreSQL-wire-aware TCP proxy that injects faults between a client and the server.

Racing `pg_terminate_backend` against a COMMIT caught the "committed but the reply was lost" case
0 times in 100 tries, so the chaos suite needs a deterministic tool: `WireFaultProxy` understands
just enough of the frontend/backend protocol to recognise a COMMIT, forward it, swallow the server's
reply and reset the client's connection. The client then sees a connection error while the server
has committed: the *uncertain* outcome of DESIGN §6. A write sent outside a transaction block
(autocommit: it commits when the server ends its implicit transaction, before its ReadyForQuery)
is lost the same way, recognised by a piece of its text (`drop_next_reply_to`). It also delays,
resets and partitions traffic.

It listens on 127.0.0.1 only and runs an asyncio loop in a daemon thread; every public method is
safe to call from any thread. Test and chaos tooling only: it lives in the test kit, never in a
product wheel.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from typing import TYPE_CHECKING, Self

from ._errors import ThrowawayClusterError

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any

__all__ = ["WireFaultProxy"]

# Codes of the untyped messages a client may send first (PostgreSQL protocol, "Message Formats").
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_MAX_STARTUP = 10_000
_STARTUP_HEADER = 8  # int32 length + int32 protocol code
_COMMIT_WORDS = frozenset(
    {"COMMIT", "END", "COMMIT WORK", "COMMIT TRANSACTION", "END WORK", "END TRANSACTION"}
)
_START_TIMEOUT_S = 5.0


def _is_commit(query: bytes) -> bool:
    text = query.rstrip(b"\x00").decode("utf-8", "replace").strip().rstrip(";").strip()
    return " ".join(text.upper().split()) in _COMMIT_WORDS


def _parse_message(body: bytes) -> tuple[bytes, bytes]:
    """Return the statement name and query text of a Parse ('P') message body."""
    name_end = body.find(b"\x00")
    query_end = body.find(b"\x00", name_end + 1)
    return body[:name_end], body[name_end + 1 : query_end]


def _bound_statement(body: bytes) -> bytes:
    """Return the statement name a Bind ('B') message body binds (portal name, statement, ...)."""
    portal_end = body.find(b"\x00")
    return body[portal_end + 1 : body.find(b"\x00", portal_end + 1)]


class _State:
    """What the proxy's connections share: armed drops, delay, the partition gate, counters."""

    def __init__(self) -> None:
        self.armed = 0
        self.armed_texts: list[bytes] = []
        self.armed_lock = threading.Lock()
        self.delay_s = 0.0
        self.flowing: asyncio.Event | None = None  # created inside the proxy's loop
        self.links: set[_Link] = set()
        self.commit_replies_dropped = 0
        self.connections_accepted = 0

    def take_armed(self) -> bool:
        """Consume one armed drop, if any."""
        with self.armed_lock:
            if self.armed == 0:
                return False
            self.armed -= 1
            return True

    def take_armed_text(self, query: bytes) -> bool:
        """Consume the first armed drop whose text `query` contains, if any."""
        with self.armed_lock:
            for text in self.armed_texts:
                if text in query:
                    self.armed_texts.remove(text)
                    return True
            return False

    async def gate(self) -> None:
        """Wait for the configured delay and while the proxy is partitioned."""
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.flowing is not None:
            await self.flowing.wait()


class _Link:
    """One proxied client connection and its upstream connection."""

    def __init__(
        self,
        proxy: _State,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.server_reader, self.server_writer = server
        # Replies are counted in ReadyForQuery ('Z') units: each simple Query and each Sync
        # produces exactly one. `swallow_from` is the number of the reply to drop, if armed.
        self.syncs_sent = 0
        self.syncs_received = 0
        self.commit_in_batch = False
        # A statement of the batch up to the next Sync carries an armed text: drop its reply.
        self.text_in_batch = False
        # The texts of the statements this connection prepared, by name (b"" the unnamed one).
        self.statements: dict[bytes, bytes] = {}
        self.swallow_from: int | None = None
        self.closed = False

    def reset(self) -> None:
        """Close both sides at once; the client side with RST (SO_LINGER 0), not a clean FIN."""
        if self.closed:
            return
        self.closed = True
        sock = self.client_writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.client_writer.transport.abort()
        self.server_writer.transport.abort()
        self.proxy.links.discard(self)

    async def client_to_server(self) -> None:
        """Forward frontend messages, spotting COMMITs; the startup phase is handled first."""
        await self._startup()
        while not self.closed:
            header = await self.client_reader.readexactly(5)
            kind = header[:1]
            (length,) = struct.unpack("!i", header[1:])
            body = await self.client_reader.readexactly(length - 4)
            self._watch(kind, body)
            await self.proxy.gate()
            self.server_writer.write(header + body)
            await self.server_writer.drain()

    def _watch(self, kind: bytes, body: bytes) -> None:
        if kind == b"Q":
            self.syncs_sent += 1
            if _is_commit(body):
                self._maybe_arm()
            elif self._marked(body):
                self._arm_now()
        elif kind == b"P":
            name, query = _parse_message(body)
            self.statements[name] = query
            self.commit_in_batch = self.commit_in_batch or _is_commit(query)
        elif kind == b"B":
            # A prepared statement is parsed once and then only bound: its text is looked up.
            if self._marked(self.statements.get(_bound_statement(body), b"")):
                self.text_in_batch = True
        elif kind == b"S":
            self._end_batch()

    def _end_batch(self) -> None:
        """Count a Sync and arm the drops that the batch it ends asked for."""
        self.syncs_sent += 1
        if self.commit_in_batch:
            self.commit_in_batch = False
            self._maybe_arm()
        if self.text_in_batch:
            self.text_in_batch = False
            self._arm_now()

    def _marked(self, query: bytes) -> bool:
        """Consume a drop armed for a text `query` contains (only while none is pending)."""
        return self.swallow_from is None and self.proxy.take_armed_text(query)

    def _maybe_arm(self) -> None:
        # Armed before the COMMIT is forwarded, so its reply cannot slip through.
        if self.swallow_from is None and self.proxy.take_armed():
            self.swallow_from = self.syncs_sent

    def _arm_now(self) -> None:
        """Drop the reply that ends with the ReadyForQuery of the message just counted."""
        if self.swallow_from is None:
            self.swallow_from = self.syncs_sent

    async def _startup(self) -> None:
        while True:
            header = await self.client_reader.readexactly(_STARTUP_HEADER)
            length, code = struct.unpack("!ii", header)
            if not _STARTUP_HEADER <= length <= _MAX_STARTUP:
                msg = f"startup packet length {length} out of range"
                raise ConnectionError(msg)
            rest = await self.client_reader.readexactly(length - _STARTUP_HEADER)
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                # Refuse encryption so the stream stays readable; libpq continues in clear text
                # (sslmode=prefer) or fails clearly (sslmode=require).
                self.client_writer.write(b"N")
                await self.client_writer.drain()
                continue
            await self.proxy.gate()
            self.server_writer.write(header + rest)
            await self.server_writer.drain()
            return

    async def server_to_client(self) -> None:
        """Forward backend messages, swallowing the reply of an armed COMMIT, then reset."""
        while not self.closed:
            header = await self.server_reader.readexactly(5)
            (length,) = struct.unpack("!i", header[1:])
            body = await self.server_reader.readexactly(length - 4)
            replying_to = self.syncs_received + 1
            if header[:1] == b"Z":
                self.syncs_received += 1
            if self.swallow_from is not None and replying_to >= self.swallow_from:
                if header[:1] == b"Z":
                    # The server has finished the COMMIT: it is durable there, and the client
                    # never hears of it.
                    self.proxy.commit_replies_dropped += 1
                    self.reset()
                    return
                continue
            await self.proxy.gate()
            self.client_writer.write(header + body)
            await self.client_writer.drain()


class WireFaultProxy:
    """A TCP proxy on 127.0.0.1 in front of PostgreSQL that can lose COMMIT replies on purpose.

    Connect clients to `port` (use `sslmode=disable` or `prefer`: the proxy refuses TLS so that
    it can read the protocol). Faults: `drop_next_commit_reply()` (deterministic lost reply of a
    committed transaction), `drop_next_reply_to(text)` (the same for an autocommit write),
    `set_delay_ms()` (each message waits), `reset_connections()` (RST every
    client), `partition()`/`heal()` (bytes stop flowing both ways, then flow again).
    """

    __module__ = "ql3_testkit"

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        # One tuple, replaced as a whole, so the loop thread never sees a half-changed address.
        self._upstream = (upstream_host, upstream_port)
        self.port = 0
        self._state = _State()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life cycle ---------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Self:
        """Listen on a free loopback port and start forwarding; returns self."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), name="ql3-wire-fault-proxy", daemon=True
        )
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S) or failure:
            self.stop()
            raise ThrowawayClusterError(f"WireFaultProxy: could not listen on 127.0.0.1: {failure}")
        return self

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except OSError as exc:
            failure.append(exc)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _listen(self) -> None:
        self._state.flowing = asyncio.Event()
        self._state.flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._state.links):
            link.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def stop(self) -> None:
        """Reset every connection, stop listening and end the thread; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_START_TIMEOUT_S)
        self._thread = None
        self._loop = None

    # -- faults -------------------------------------------------------------------------------

    def drop_next_commit_reply(self) -> None:
        """Arm one drop: the next COMMIT (on any connection) is forwarded, its reply swallowed.

        After the server's ReadyForQuery for that COMMIT (so the transaction is finished on the
        server) the client connection is reset. Each call arms one more drop;
        `commit_replies_dropped` counts the drops done.
        """
        with self._state.armed_lock:
            self._state.armed += 1

    def drop_next_reply_to(self, text: str) -> None:
        """Arm one drop: the next statement whose text contains `text` loses its reply.

        The statement (sent alone or in a batch, simple or extended protocol, prepared or not)
        is forwarded, and the server's reply is swallowed up to its ReadyForQuery, after which
        the client connection is reset. Sent outside a transaction block (autocommit) the
        statement has committed on the server by then, and the client never hears of it: the
        lost reply of an autocommit write. Counted in `commit_replies_dropped`.
        """
        with self._state.armed_lock:
            self._state.armed_texts.append(text.encode())

    def set_upstream(self, upstream_host: str, upstream_port: int) -> None:
        """Send new connections to another server (a failover behind a stable address).

        Open connections keep their server; call `reset_connections()` to move them too.
        """
        self._upstream = (upstream_host, upstream_port)

    @property
    def upstream(self) -> tuple[str, int]:
        """The (host, port) new connections are forwarded to."""
        return self._upstream

    def set_delay_ms(self, ms: int) -> None:
        """Hold every forwarded message for `ms` milliseconds (0 to stop delaying)."""
        if ms < 0:
            raise ValueError(f"delay ms must be >= 0, got {ms}")
        self._state.delay_s = ms / 1000

    def reset_connections(self) -> None:
        """Reset (RST) every current client connection and close its upstream connection."""
        self._call(self._reset_all())

    async def _reset_all(self) -> None:
        for link in list(self._state.links):
            link.reset()

    def partition(self) -> None:
        """Stop forwarding bytes in both directions; connections stay open, data waits."""
        self._call(self._set_flowing(flowing=False))

    def heal(self) -> None:
        """Resume forwarding after `partition()`; data held meanwhile is delivered."""
        self._call(self._set_flowing(flowing=True))

    async def _set_flowing(self, *, flowing: bool) -> None:
        if self._state.flowing is None:
            return
        if flowing:
            self._state.flowing.set()
        else:
            self._state.flowing.clear()

    @property
    def connections(self) -> int:
        """How many client connections are open now."""
        return len(self._state.links)

    @property
    def commit_replies_dropped(self) -> int:
        """How many COMMIT replies were swallowed so far."""
        return self._state.commit_replies_dropped

    @property
    def connections_accepted(self) -> int:
        """How many client connections the proxy has accepted so far."""
        return self._state.connections_accepted

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        loop = self._loop
        if loop is None:
            coro.close()
            raise ThrowawayClusterError("WireFaultProxy is not started")
        asyncio.run_coroutine_threadsafe(coro, loop).result(_START_TIMEOUT_S)

    # -- forwarding ---------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._state.connections_accepted += 1
        try:
            upstream = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(self._state, (reader, writer), upstream)
        self._state.links.add(link)
        tasks = [
            asyncio.ensure_future(link.client_to_server()),
            asyncio.ensure_future(link.server_to_client()),
        ]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
            link.reset()
