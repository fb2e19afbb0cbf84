"""The worker's wake-ups: one thread LISTENs and makes the loop poll as soon as work is queued.

Without it an idle worker sees an admitted Run only at its next poll (up to `poll_interval_ms`
late). Every transaction that queues attempts notifies `ql3_attempt_queued` once (migration
0015); this thread waits for it on its own connection (`ql3_cluster_postgres.AttemptWakeups`)
and calls `wake`, which makes the loop poll at once. The notification is only a hint: the take
decides what is takeable, so several workers woken together simply race with SKIP LOCKED.

Polling stays the fallback and the source of truth, so losing the listener never loses work: on a
fault the thread logs a WARNING, backs off with jitter (the worker's `Backoff`) and connects
again, while the loop keeps polling at its interval; after every (re)connect it wakes the loop
once, because what was queued while nobody listened notified nobody. Retries whose backoff has
not passed are found by polling too. The thread never ends the worker.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Final, Protocol

from ql3_runtime_core import QL3Error, log_event

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_control._backoff import Backoff

__all__ = ["WakeupListener", "WakeupSource"]

logger = logging.getLogger(__name__)

# Longest one wait blocks: how soon the thread notices a stop.
_WAIT_S: Final = 0.5


class WakeupSource(Protocol):
    """What the listener needs of the database (`ql3_cluster_postgres.AttemptWakeups`)."""

    def wait(self, timeout_s: float) -> bool: ...

    def close(self) -> None: ...


class WakeupListener:
    """Calls `wake` whenever attempts were queued (or the listening connection was reopened)."""

    def __init__(
        self,
        factory: Callable[[], WakeupSource],
        *,
        wake: Callable[[], None],
        backoff: Backoff,
        worker_id: str,
    ) -> None:
        self._factory = factory
        self._wake = wake
        self._backoff = backoff
        self._worker_id = worker_id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._source: WakeupSource | None = None
        # Wake-ups delivered to the loop, for tests and metrics.
        self.wakeups = 0
        # Set while the connection listens; cleared on a fault until it listens again.
        self.listening = threading.Event()

    def start(self) -> WakeupListener:
        """Start the thread (a daemon: it holds nothing a dying worker must hand back)."""
        self._thread = threading.Thread(target=self._main, name="ql3-wakeups", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the thread to stop after its current wait; wait up to `timeout_s` for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _main(self) -> None:
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    if self._source is None:
                        self._source = self._factory()
                    woken = self._source.wait(_WAIT_S)
                except Exception as exc:  # noqa: BLE001 - polling covers; the thread must go on
                    failures += 1
                    self._fault(exc, failures)
                    continue
                if failures or not self.listening.is_set():
                    failures = 0
                    self.listening.set()
                    log_event(logger, logging.INFO, "worker.listening", worker_id=self._worker_id)
                if woken:
                    self._wake()
                    self.wakeups += 1  # after the wake: a reader of the count sees its effect
        finally:
            self.listening.clear()
            self._close_source()

    def _close_source(self) -> None:
        source, self._source = self._source, None
        if source is not None:
            try:
                source.close()
            except QL3Error as exc:
                log_event(logger, logging.DEBUG, "wakeups.close_failed", reason=str(exc))

    def _fault(self, exc: Exception, failures: int) -> None:
        """Log, back off and let the next wait reconnect; polling covers the meantime."""
        self.listening.clear()
        if not isinstance(exc, QL3Error):
            # Not the driver's fault wrapped by the ingress: start over with a new source.
            self._close_source()
        delay = self._backoff.delay_s(failures)
        log_event(
            logger,
            logging.WARNING,
            "wakeups.fault",
            worker_id=self._worker_id,
            error=type(exc).__name__,
            reason=str(exc),
            attempt=failures,
            retry_in_ms=round(delay * 1000),
        )
        self._stop.wait(delay)
