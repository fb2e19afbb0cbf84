"""The attempts one worker runs: one runner per attempt, the lease renewals that keep them.

The loop thread starts, renews and reaps runners while each runner's own thread ends it, so the
table is guarded by one lock. A runner holds its slot (`busy`) until its thread is done; it needs
its lease (`live`) until its end is recorded or it was handed back (`settled`).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uuid import UUID

    from ql3_runtime_core import WorkerRepository

    from ._attempt_runner import AttemptRunner
    from ._metrics import WorkerMetrics

__all__ = ["RunnerSlots"]


class RunnerSlots:
    """The runners of one worker, by attempt id; `metrics.running` follows their number."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._metrics = metrics
        self._runners: dict[int, AttemptRunner] = {}
        self._lock = threading.Lock()

    def live(self) -> list[AttemptRunner]:
        """Runners whose attempt still needs its lease."""
        with self._lock:
            return [r for r in self._runners.values() if not r.settled.is_set()]

    def busy(self) -> int:
        """How many slots are taken (a runner frees its slot once its thread is done)."""
        with self._lock:
            return len(self._runners)

    def attempt_ids(self) -> list[int]:
        """Return the attempts this worker knows it holds (a settled take keeps them)."""
        with self._lock:
            return list(self._runners)

    def start(self, runner: AttemptRunner) -> None:
        """Take a slot for `runner` and start its thread."""
        with self._lock:
            self._runners[runner.attempt.attempt_id] = runner
            self._metrics.running.set(len(self._runners))
        runner.start()

    def reap(self) -> bool:
        """Forget runners that ended (their slot is free again); True when any did."""
        freed = False
        with self._lock:
            for attempt_id in [i for i, r in self._runners.items() if r.done.is_set()]:
                runner = self._runners.pop(attempt_id)
                if runner.outcome is not None:
                    self._metrics.observe_outcome(runner.outcome)
                freed = True
            self._metrics.running.set(len(self._runners))
        return freed

    def renew(self, repository: WorkerRepository, lease_token: UUID, lease_ms: int) -> None:
        """Renew the leases of the live runners in one statement; stop those no longer renewed."""
        live = self.live()
        if not live:
            return
        # The send time, not the answer's: the database's expiry counts from its own clock
        # reading, which comes after the send. An uncertain renewal raises and confirms nothing.
        sent_at = time.monotonic()
        renewed = repository.renew_leases(
            lease_token, [r.attempt.attempt_id for r in live], lease_ms
        )
        for runner in live:
            if runner.attempt.attempt_id in renewed:
                runner.confirm(sent_at)
            elif not runner.settled.is_set():
                runner.lose("the database no longer renews its lease (expired or ended)")
