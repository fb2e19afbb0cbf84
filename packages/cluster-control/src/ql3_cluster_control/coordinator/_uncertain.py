"""Settling a commit whose reply was lost, from durable facts, until it is settled (DESIGN §6).

The commit may have landed or not; asking again never re-admits, because the repository commits
again only while the exact claim still stands and the run's UNIQUE occurrence is the final word.
So the question is simply repeated, with the cycle's backoff between tries (tenacity's
`Retrying`), until the answer is no longer uncertain. Only a stop request gives up: the claim is
then left to expire by database time, and the outcome stays uncertain.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ql3_runtime_core import (
    ClockRegressionError,
    CommitOutcome,
    CommitStatus,
    QL3Error,
    log_event,
)
from tenacity import retry_if_result

from ql3_cluster_control._backoff import RetryStopped, sleep_unless

if TYPE_CHECKING:
    import threading

    from ql3_runtime_core import ClaimCommit, ScheduleRepository

    from ql3_cluster_control._backoff import Backoff
    from ql3_cluster_control._metrics import CoordinatorMetrics

__all__ = ["settle_uncertain"]

logger = logging.getLogger(__name__)


def _unsettled(outcome: CommitOutcome) -> bool:
    return outcome.status is CommitStatus.UNCERTAIN


def settle_uncertain(
    repository: ScheduleRepository,
    commit: ClaimCommit,
    *,
    backoff: Backoff,
    stop_requested: threading.Event,
    metrics: CoordinatorMetrics | None,
) -> CommitOutcome:
    """Return the settled outcome of `commit`, or UNCERTAIN if a stop came first.

    Raises:
        ClockRegressionError: the database clock went back; the cycle gives up its claims.

    """
    schedule_id = commit.claim.schedule_id
    unsettled = CommitOutcome(schedule_id=schedule_id, status=CommitStatus.UNCERTAIN)

    def resolve() -> CommitOutcome:
        try:
            return repository.resolve_uncertain_commit(commit)
        except ClockRegressionError:
            raise
        except QL3Error as exc:
            # The database could not answer yet: as uncertain as before, ask again.
            log_event(
                logger, logging.WARNING, "uncertain.retry", schedule_id=schedule_id, reason=str(exc)
            )
            return unsettled

    retrying = backoff.retrying(
        sleep=sleep_unless(stop_requested), retry=retry_if_result(_unsettled)
    )
    try:
        outcome = retrying(resolve)
    except RetryStopped:
        log_event(logger, logging.WARNING, "uncertain.abandoned", schedule_id=schedule_id)
        return unsettled
    if metrics is not None:
        metrics.uncertain_resolved.labels(outcome=outcome.status.value).inc()
    log_event(
        logger,
        logging.WARNING,
        "uncertain.resolved",
        schedule_id=schedule_id,
        outcome=outcome.status.value,
    )
    return outcome
