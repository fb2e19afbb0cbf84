"""Recording how attempts ended: the worker's finish, its retries and their settling.

A finish is sent until the database answers (database faults are retried with backoff until the
worker aborts). A finish whose answer was lost, or acknowledged only by a server that may lose
it, is uncertain: every retry after a fault is sent with `settle=True` (a durability barrier on
a fresh connection first), so an answer saying the attempt was already recorded is a fact a
failover keeps, and a finish kept only by a primary being replaced is sent again to its
successor. The worker never forgets an end before the database has it durably, or has told it
the attempt is no longer its own.

A transactional Python task's work and its success commit in one transaction
(`WorkerRepository.finish_in_transaction`). If that commit's answer is lost, the recorder settles
it the same way, with a failed result: when the success landed, the settled finish finds it
("already recorded succeeded by this worker"); when it did not, nothing the task wrote was kept
and the attempt is recorded failed, retried like any failure.

Every end is logged with what the database says happened, never guessed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, TypedDict

from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    QL3Error,
    RepositoryUnavailableError,
    log_event,
)
from tenacity import retry_if_exception_type

from ql3_cluster_control._backoff import RetryStopped, sleep_unless
from ql3_cluster_control._tracing import span

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from uuid import UUID

    from ql3_runtime_core import (
        AbandonedAttempt,
        FinishedAttempt,
        TakenAttempt,
        WorkerRepository,
    )
    from tenacity import RetryCallState

    from ql3_cluster_control._backoff import Backoff

    from ._attempt_runner import AttemptRunner

__all__ = ["AttemptRecorder", "attempt_ids", "report_abandoned"]

logger = logging.getLogger(__name__)

_LOST_TRANSACTION: Final = AttemptResult(
    outcome=AttemptOutcome.FAILED,
    output_tail=(
        "ql3: the database connection failed while this task's transaction ran or committed;"
        " nothing it wrote was kept"
    ),
)
_FINAL = frozenset(
    {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.TIMED_OUT, AttemptState.ABANDONED}
)


class AttemptFields(TypedDict):
    """The fields every attempt log record carries (typed, so they unpack into `log_event`)."""

    attempt_id: int
    run_id: int
    attempt: int
    task: str


def attempt_ids(attempt: TakenAttempt) -> AttemptFields:
    """Return the fields every attempt log record carries (stable names log readers rely on)."""
    return {
        "attempt_id": attempt.attempt_id,
        "run_id": attempt.run_id,
        "attempt": attempt.attempt_number,
        "task": attempt.task_name,
    }


_FOUND: Final = {
    AttemptState.ABANDONED: "recorded abandoned: its lease expired before its end was recorded",
    AttemptState.QUEUED: "queued: no longer held by this worker (handed back, or its take lost)",
    AttemptState.RUNNING: "running under another lease",
    # Never this worker's own end, though its take is the one the row names: the database ended
    # it, and the worker killed the command when the next renewal was refused (DESIGN §10).
    AttemptState.CANCELLED: (
        "recorded cancelled: a newer Run of its schedule replaced it (overlap policy replace)"
    ),
}


def report_abandoned(abandoned: AbandonedAttempt) -> None:
    """Log an attempt of another worker this one marked abandoned (its lease expired)."""
    log_event(
        logger,
        logging.INFO,
        "attempt.abandoned",
        attempt_id=abandoned.attempt_id,
        run_id=abandoned.run_id,
        attempt=abandoned.attempt_number,
        holder=abandoned.worker_id,
        lease_expired_at_ms=abandoned.lease_expired_at_ms,
        abandoned_at_ms=abandoned.abandoned_at_ms,
        next_attempt_id=abandoned.next_attempt_id,
        next_not_before_ms=abandoned.next_not_before_ms,
    )


def found_text(finished: FinishedAttempt | None) -> str:
    """Say what the database holds for an attempt whose end was not recorded by this finish."""
    if finished is None:
        return "the database could not be reached before the worker stopped"
    state = finished.state_found
    if state is None:
        return "no such attempt"
    if finished.ended_by_this_lease and state in _FINAL:
        return f"already recorded {state.value} by this worker"
    return _FOUND.get(state, f"recorded {state.value} by another worker")


class AttemptRecorder:
    """Records the ends of one worker's attempts through its repository."""

    def __init__(
        self,
        repository: Callable[[], WorkerRepository],
        lease_token: UUID,
        backoff: Backoff,
        abort: threading.Event,
    ) -> None:
        self._repository = repository
        self._lease_token = lease_token
        self._backoff = backoff
        self._abort = abort

    def record(self, runner: AttemptRunner, result: AttemptResult, settle: bool) -> None:  # noqa: FBT001  # the Recorder signature
        """Record how `runner`'s attempt ended, retrying through database faults until abort."""
        attempt = runner.attempt
        with span(
            "ql3.finish",
            run_id=attempt.run_id,
            attempt_id=attempt.attempt_id,
            outcome=result.outcome.value,
        ):
            finished = self._finish(attempt, result, settle=settle)
        self._report(runner, result, finished)

    def record_transaction(self, runner: AttemptRunner, work: Callable[[Any], None]) -> None:
        """Run a transactional task's work and record its success in the same transaction."""
        attempt = runner.attempt
        try:
            finished = self._repository().finish_in_transaction(
                attempt.attempt_id,
                self._lease_token,
                work,
                timeout_ms=attempt.execution.timeout_ms,
            )
        except QL3Error as exc:
            log_event(
                logger,
                logging.WARNING,
                "attempt.transaction_uncertain",
                **attempt_ids(attempt),
                reason=str(exc),
            )
            self.record(runner, _LOST_TRANSACTION, settle=True)
            return
        self._report(runner, AttemptResult(outcome=AttemptOutcome.SUCCEEDED), finished)

    def _finish(
        self, attempt: TakenAttempt, result: AttemptResult, *, settle: bool
    ) -> FinishedAttempt | None:
        """Send the finish until the database answers; None once aborted or refused."""
        settling = settle

        def finish() -> FinishedAttempt:
            nonlocal settling
            try:
                return self._repository().finish_attempt(
                    attempt.attempt_id, self._lease_token, result, settle=settling
                )
            except RepositoryUnavailableError:
                # The answer may have been lost after the finish landed, or the finish landed
                # only on a server that may lose it: every retry settles from durable facts.
                settling = True
                raise

        def report_retry(state: RetryCallState) -> None:
            fault = None if state.outcome is None else state.outcome.exception()
            delay = 0.0 if state.next_action is None else state.next_action.sleep
            log_event(
                logger,
                logging.WARNING,
                "attempt.record_retry",
                **attempt_ids(attempt),
                retry_in_ms=round(delay * 1000),
                reason=str(fault),
            )

        retrying = self._backoff.retrying(
            retry=retry_if_exception_type(RepositoryUnavailableError),
            sleep=sleep_unless(self._abort),
            before_sleep=report_retry,
        )
        try:
            return retrying(finish)
        except RetryStopped:
            return None
        except QL3Error as exc:
            # Not a fault to retry: the lease settles it (it expires by database time).
            log_event(
                logger,
                logging.ERROR,
                "attempt.record_failed",
                **attempt_ids(attempt),
                reason=str(exc),
            )
            return None

    def _report(
        self, runner: AttemptRunner, result: AttemptResult, finished: FinishedAttempt | None
    ) -> None:
        attempt = runner.attempt
        if finished is not None and finished.recorded:
            runner.outcome = result.outcome.value
            log_event(
                logger,
                logging.INFO,
                "attempt.finished",
                **attempt_ids(attempt),
                outcome=result.outcome.value,
                exit_code=result.exit_code,
                finished_at_ms=finished.finished_at_ms,
                next_attempt_id=finished.next_attempt_id,
                next_not_before_ms=finished.next_not_before_ms,
            )
            return
        found = None if finished is None else finished.state_found
        ours = finished is not None and finished.ended_by_this_lease and found in _FINAL
        if runner.outcome is None:
            runner.outcome = found.value if ours and found is not None else "lost"
        text = found_text(finished)
        # Already recorded by this very lease is the expected end of a settled retry (INFO);
        # anything else means the attempt ended without this worker's result being kept.
        log_event(
            logger,
            logging.INFO if ours else logging.WARNING,
            "attempt.already_recorded" if ours else "attempt.not_recorded",
            **attempt_ids(attempt),
            outcome=result.outcome.value,
            state_found=None if found is None else found.value,
            found=text,
        )
