"""Handing attempts back when a worker stops: only what is known to be stopped is released.

A stopping worker kills what still runs past its grace (a command's process group, killed and
reaped; a callable asked to return) and releases those attempts: queued again with the same
number, eligible at once, no attempt used up. A runner that did not stop in time (a callable
still running) is not released: its lease expires and another worker abandons it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ql3_runtime_core import QL3Error, log_event

from ._attempt_runner import KILL_GRACE_S

if TYPE_CHECKING:
    from collections.abc import Sequence
    from uuid import UUID

    from ql3_runtime_core import WorkerRepository

    from ._attempt_runner import AttemptRunner

__all__ = ["release_runners"]

logger = logging.getLogger(__name__)


def release_runners(
    repository: WorkerRepository | None,
    worker_id: str,
    lease_token: UUID,
    runners: Sequence[AttemptRunner],
) -> list[int]:
    """Stop what still runs, wait until it is stopped, and hand its attempts back."""
    for runner in runners:
        runner.request_release()
    deadline = time.monotonic() + KILL_GRACE_S + 1
    for runner in runners:
        runner.settled.wait(max(deadline - time.monotonic(), 0))
    ids = [r.attempt.attempt_id for r in runners if r.needs_release]
    if not ids or repository is None:
        return []
    try:
        released = repository.release_attempts(worker_id, lease_token, ids)
    except QL3Error as exc:
        # Their leases expire by database time; another worker then abandons and retries them.
        log_event(
            logger, logging.WARNING, "attempts.release_failed", attempt_ids=ids, reason=str(exc)
        )
        return []
    for attempt_id in released:
        log_event(logger, logging.INFO, "attempt.released", attempt_id=attempt_id)
    return released
