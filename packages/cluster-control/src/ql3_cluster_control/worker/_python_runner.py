"""Running a Python task: a registered callable, in a (kept, `_threads`) thread of the worker.

Python cannot kill a thread, so a callable's timeout, a lost lease and a graceful stop are
cooperative: the worker sets `TaskContext.cancelled` and the callable should check it (or
`remaining_s()`) and return. At the timeout the worker records `timed_out` at once (and the
successor is queued); the slot stays busy until the callable returns, and what it returns then
is ignored. A stopping worker hands an attempt back only once its callable has returned (it
waits `KILL_GRACE_S` for that after asking); one still running is left to its lease, which
expires and is abandoned. A task that must be killed hard belongs in a command.

A transactional task (`Worker.task(name, transactional=True)`) gets the worker's database
connection as `context.connection`, inside a transaction, and the attempt is recorded succeeded
by that same transaction after the callable returns: its writes and the success commit together
or not at all. When the attempt is no longer this worker's by then (its lease expired and it was
abandoned, it was recorded timed out), the finish is refused and the transaction rolls back, so
its writes vanish with it. What the callable raises rolls the transaction back too, and the
attempt is recorded failed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ql3_runtime_core import AttemptOutcome, AttemptResult, log_event

from ._attempt_runner import KILL_GRACE_S, POLL_S, AttemptRunner
from ._command_output import output_tail
from ._threads import REUSED_THREADS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ql3_cluster_postgres import TaskConnection
    from ql3_runtime_core import TakenAttempt

    from ._attempt_runner import Recorder

__all__ = ["PythonRunner", "TaskContext", "TaskFunction", "Transactor"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What a Python task receives: the run it executes, and a way to notice its timeout.

    `run_id` is the idempotency key: every attempt of one Run carries the same one, so a task
    that writes somewhere keys its writes by it and a retry does no harm. `scheduled_for_ms` is
    the occurrence (database epoch ms); `payload` the task's payload template. `cancelled` is
    set when the attempt timed out, lost its lease or is being handed back by a stopping worker:
    return soon after, the result no longer counts. `connection` is set for a transactional
    task only: a psycopg connection inside the transaction that records the attempt succeeded
    (do not commit, roll back or keep it; write what must happen exactly once through it).
    """

    __module__ = "ql3_cluster_control"

    run_id: int
    attempt: int
    attempt_id: int
    scheduled_for_ms: int
    task_name: str
    payload: Mapping[str, Any]
    worker_id: str
    timeout_s: float
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    connection: TaskConnection | None = field(default=None, repr=False)
    _deadline: float = field(default=0.0, repr=False)

    def remaining_s(self) -> float:
        """Seconds left before the timeout (monotonic; 0 once passed)."""
        return max(self._deadline - time.monotonic(), 0.0)


# A Python task: called with its context; what it returns is ignored, what it raises fails it.
TaskFunction: TypeAlias = Callable[[TaskContext], object]
# The worker's way to run a transactional task's work and record its success in one
# transaction (or settle that transaction's fate); it records every outcome but the work's
# own failure, which it raises.
Transactor: TypeAlias = Callable[[AttemptRunner, Callable[[Any], None]], None]


class _TaskRaised(Exception):  # noqa: N818  # a carrier, not an error of its own
    """Carries what a transactional task raised through the transaction that rolled it back."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(str(raised))
        self.raised = raised


class PythonRunner(AttemptRunner):
    """Runs a Python task's callable in a thread (see the module docstring)."""

    def __init__(
        self,
        attempt: TakenAttempt,
        function: TaskFunction,
        *,
        worker_id: str,
        record: Recorder,
        on_done: Callable[[], None],
        confirmed_at: float,
        lease_s: float,
        transact: Transactor | None = None,
    ) -> None:
        super().__init__(
            attempt,
            worker_id=worker_id,
            record=record,
            on_done=on_done,
            confirmed_at=confirmed_at,
            lease_s=lease_s,
        )
        self._function = function
        self._transact = transact

    def _execute(self) -> None:
        timeout_s = self.attempt.execution.timeout_ms / 1000
        context = TaskContext(
            run_id=self.attempt.run_id,
            attempt=self.attempt.attempt_number,
            attempt_id=self.attempt.attempt_id,
            scheduled_for_ms=self.attempt.scheduled_for_ms,
            task_name=self.attempt.task_name,
            payload=dict(self.attempt.payload),
            worker_id=self.worker_id,
            timeout_s=timeout_s,
            _deadline=time.monotonic() + timeout_s,
        )
        # The callable's result; None when its transaction recorded the end itself.
        results: list[AttemptResult | None] = []
        finished = threading.Event()
        REUSED_THREADS.submit(
            f"ql3-task-{self.attempt.attempt_id}",
            functools.partial(self._call, context, results, finished),
        )
        self._await(context, finished, results)
        finished.wait()  # the slot stays busy until the callable returns

    def _await(
        self, context: TaskContext, finished: threading.Event, results: list[AttemptResult | None]
    ) -> None:
        """Wait for the callable, then record its result, unless the attempt settled first."""
        while not finished.wait(POLL_S):
            if context.remaining_s() <= 0:
                context.cancelled.set()
                note = f"ql3: timed out after {context.timeout_s:g} s; context.cancelled was set"
                self.record(AttemptResult(outcome=AttemptOutcome.TIMED_OUT, output_tail=note))
                return
            if self._release.is_set():
                context.cancelled.set()
                self._hand_back(finished, results)
                return
            if self._lease_lost():
                # It cannot be killed: ask it to stop; its result is recorded only if the
                # attempt is still ours by then (the finish is fenced by the lease).
                context.cancelled.set()
        result = results[0] if results else _crashed()
        if result is None:
            self.settled.set()
        else:
            self.record(result)

    def _hand_back(self, finished: threading.Event, results: list[AttemptResult | None]) -> None:
        """Release the attempt once its callable returned; one still running is not released."""
        if finished.wait(KILL_GRACE_S):
            if not (results and results[0] is None):
                self.needs_release, self.outcome = True, "released"
        else:
            # A thread cannot be killed: handing back an attempt whose callable still runs
            # would let a second worker run it at the same time. Its lease expires instead.
            log_event(
                logger,
                logging.WARNING,
                "attempt.not_released",
                attempt_id=self.attempt.attempt_id,
                still_running_after_s=KILL_GRACE_S,
            )
        self.settled.set()

    def _call(
        self,
        context: TaskContext,
        results: list[AttemptResult | None],
        finished: threading.Event,
    ) -> None:
        try:
            if self._transact is None:
                self._function(context)
                results.append(AttemptResult(outcome=AttemptOutcome.SUCCEEDED))
            else:
                self._call_in_transaction(context, self._transact)
                results.append(None)  # its transaction recorded the end (or settled it)
        except BaseException as exc:  # noqa: BLE001  # whatever it raised, the attempt failed
            results.append(_failed(exc))
        finally:
            finished.set()

    def _call_in_transaction(self, context: TaskContext, transact: Transactor) -> None:
        """Run the callable inside the transaction that records its success."""

        def work(connection: Any) -> None:  # noqa: ANN401  # the driver's connection, opaque here
            try:
                self._function(dataclasses.replace(context, connection=connection))
            except BaseException as exc:
                raise _TaskRaised(exc) from exc

        try:
            transact(self, work)
        except _TaskRaised as raised:
            raise raised.raised from None


def _failed(exc: BaseException) -> AttemptResult:
    text = "".join(traceback.format_exception(exc))
    return AttemptResult(outcome=AttemptOutcome.FAILED, output_tail=output_tail(text.encode()))


def _crashed() -> AttemptResult:  # pragma: no cover - _call always appends a result
    return AttemptResult(outcome=AttemptOutcome.FAILED, output_tail="ql3: no result")
