"""Taking work for one worker: abandon expired leases, settle a lost take, fill the free slots.

A poll first marks abandoned the attempts of other workers whose lease expired by the database
clock (queuing their successors), at most once per poll interval: a poll made at once (a slot
freed, attempts queued) skips that sweep when the last one is younger, so a busy worker spends
one transaction per attempt on taking, not two (leases last seconds; a sweep a poll interval
late changes nothing). It then takes as many eligible attempts as there are
free slots, oldest eligible first. A take that failed may have landed unseen (its answer lost)
or only on a server being replaced: before taking again, the attempts it may have given this
worker are settled from durable facts and handed back unused (`settle_taken_attempts`), so a lost
answer never burns an attempt.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

from ql3_runtime_core import RepositoryUnavailableError, log_event

from ql3_cluster_control._tracing import add_attributes, span

from ._attempt_runner import AttemptRunner, CommandRunner
from ._python_runner import PythonRunner
from ._recorder import report_abandoned

if TYPE_CHECKING:
    from collections.abc import Callable
    from uuid import UUID

    from ql3_runtime_core import TakenAttempt, WorkerRepository

    from ql3_cluster_control._config import WorkerSettings

    from ._metrics import WorkerMetrics
    from ._recorder import AttemptRecorder
    from ._slots import RunnerSlots
    from ._tasks import TaskRegistry

__all__ = ["AttemptTaker"]

logger = logging.getLogger(__name__)

# Expired leases handled per poll; more wait for the next one.
_ABANDON_BATCH: Final = 100


class AttemptTaker:
    """Takes attempts into a worker's free slots and starts a runner for each."""

    def __init__(
        self,
        settings: WorkerSettings,
        lease_token: UUID,
        *,
        slots: RunnerSlots,
        tasks: TaskRegistry,
        recorder: AttemptRecorder,
        metrics: WorkerMetrics,
        on_done: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._lease_token = lease_token
        self._slots = slots
        self._tasks = tasks
        self._recorder = recorder
        self._metrics = metrics
        self._on_done = on_done
        # A take failed: it may have landed unseen; settle before taking again.
        self.unsettled = False
        # When the next sweep of expired leases is due (monotonic).
        self._next_sweep = 0.0

    def poll(self, repository: WorkerRepository) -> bool:
        """Abandon expired leases, settle a lost take, take; True when every free slot was filled.

        Raises:
            QL3Error: a database fault (a take's fault leaves it to settle at the next poll).

        """
        self._sweep(repository)
        self.settle(repository)
        free = self._settings.concurrency - self._slots.busy()
        if free <= 0:
            return False
        sent_at = time.monotonic()
        try:
            with span("ql3.take", worker_id=self._settings.id) as current:
                taken = repository.take_attempts(
                    worker_id=self._settings.id,
                    lease_token=self._lease_token,
                    lease_ms=self._settings.lease_ms,
                    limit=free,
                    python_tasks=self._tasks.names,
                    commands=self._settings.run_commands,
                )
                add_attributes(current, run_ids=[attempt.run_id for attempt in taken])
        except RepositoryUnavailableError:
            self.unsettled = True
            raise
        for attempt in taken:
            self._start(attempt, sent_at)
        return len(taken) == free

    def _sweep(self, repository: WorkerRepository) -> None:
        """Abandon other workers' expired leases, unless a sweep ran within the poll interval."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        for abandoned in repository.abandon_expired_attempts(_ABANDON_BATCH):
            self._metrics.abandoned.inc()
            report_abandoned(abandoned)
        # Set only once the sweep succeeded: a failed one is tried again at the next poll.
        self._next_sweep = now + self._settings.poll_interval_ms / 1000

    def settle(self, repository: WorkerRepository) -> None:
        """After a failed take: hand back what it gave this worker unseen (no attempt used)."""
        if not self.unsettled:
            return
        known = self._slots.attempt_ids()
        released = repository.settle_taken_attempts(self._settings.id, self._lease_token, known)
        self.unsettled = False
        log_event(logger, logging.INFO, "take.settled", released_attempt_ids=released)

    def _start(self, attempt: TakenAttempt, confirmed_at: float) -> None:
        self._metrics.observe_taken(attempt.queue_delay_ms)
        worker_id, lease_s = self._settings.id, self._settings.lease_ms / 1000
        runner: AttemptRunner
        if attempt.execution.command is not None:
            runner = CommandRunner(
                attempt,
                worker_id=worker_id,
                record=self._recorder.record,
                on_done=self._on_done,
                confirmed_at=confirmed_at,
                lease_s=lease_s,
            )
        else:
            function, transactional = self._tasks.lookup(attempt.task_name, worker_id)
            runner = PythonRunner(
                attempt,
                function,
                worker_id=worker_id,
                record=self._recorder.record,
                on_done=self._on_done,
                confirmed_at=confirmed_at,
                lease_s=lease_s,
                transact=self._recorder.record_transaction if transactional else None,
            )
        self._slots.start(runner)
