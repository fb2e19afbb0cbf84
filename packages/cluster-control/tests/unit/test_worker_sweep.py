"""A worker sweeps expired leases once per poll interval, however often it is woken to take.

Polls made at once (a slot freed, attempts queued) take without the sweep while the last one is
younger than the poll interval, so a busy worker spends one transaction per take, not two.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from fix_db import wait_for
from ql3_cluster_control import Worker, WorkerSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_runtime_core import AbandonedAttempt, TakenAttempt


class _Counting:
    """A worker repository with no work that counts the takes and the sweeps it is asked for."""

    def __init__(self) -> None:
        self.takes = 0
        self.sweeps = 0

    def check_schema(self) -> int:
        return 15

    def take_attempts(self, **_: Any) -> list[TakenAttempt]:
        self.takes += 1
        return []

    def abandon_expired_attempts(self, _limit: int) -> list[AbandonedAttempt]:
        self.sweeps += 1
        return []

    def settle_taken_attempts(self, *_: Any) -> list[int]:  # pragma: no cover - no lost take
        return []

    def renew_leases(self, *_: Any) -> dict[int, int]:  # pragma: no cover - nothing held
        return {}

    def release_attempts(self, *_: Any) -> list[int]:
        return []

    def close(self) -> None:
        """Nothing to close."""


def _started(poll_interval_ms: int) -> tuple[Worker, _Counting, threading.Thread]:
    stub = _Counting()
    worker = Worker(
        WorkerSettings(dsn="host=unused", id="w", poll_interval_ms=poll_interval_ms),
        repository_factory=lambda: stub,  # type: ignore[arg-type,return-value]
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_for(lambda: stub.takes >= 1, timeout_s=10, what="the first poll")
    return worker, stub, thread


def _takes_reach(stub: _Counting, count: int) -> Callable[[], bool]:
    return lambda: stub.takes >= count


def test_wakeups_take_without_sweeping_again_within_the_poll_interval() -> None:
    """Five wake-ups within a 60 s poll interval: six takes, one sweep."""
    worker, stub, thread = _started(60_000)
    for expected in range(2, 7):
        worker._poll_now()
        wait_for(_takes_reach(stub, expected), timeout_s=10, what=f"take {expected}")
    worker.request_stop()
    thread.join(timeout=10)
    assert (stub.takes, stub.sweeps) == (6, 1)


def test_the_sweep_comes_back_every_poll_interval() -> None:
    """With a short poll interval, sweeps go on by themselves, one per timed poll."""
    worker, stub, thread = _started(20)
    wait_for(lambda: stub.sweeps >= 3, timeout_s=10, what="three sweeps")
    worker.request_stop()
    thread.join(timeout=10)
    assert stub.sweeps <= stub.takes
