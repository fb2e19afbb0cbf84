"""Reused daemon threads for runners, Python task calls and command output readers.

Every attempt needs a control thread (its runner) and a Python task a second one (its call); a
command whose output pipe an escaped grandchild still holds gets one reading it to its end.
Starting a thread makes the starter wait until the new thread is scheduled; on a busy machine that
wait is the loop thread's largest cost per attempt, paid while it could be taking the next one.
So threads are kept: a job goes to an idle thread when there is one, and a new thread is started
only when all are busy. Their number therefore never exceeds the most jobs that ran at once
(a worker's runners, calls and readers are bounded by its slots).

The threads are daemon threads, like the ones they replace: a Python callable that never
returns cannot be killed, and must not keep a stopping worker's process alive. Each job runs
under the thread name it would have had on a thread of its own (`ql3-attempt-N`,
`ql3-task-N`, `ql3-output-N`), for thread dumps and log records.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Final

from ql3_runtime_core import log_event

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["REUSED_THREADS", "ReusedThreads"]

logger = logging.getLogger(__name__)

_IDLE_NAME: Final = "ql3-idle"


class ReusedThreads:
    """Runs jobs on kept daemon threads, starting one only when every kept thread is busy."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[str, Callable[[], None]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._started = 0

    @property
    def started(self) -> int:
        """How many threads were started so far (they are never stopped)."""
        with self._lock:
            return self._started

    @property
    def idle(self) -> int:
        """How many kept threads wait for a job."""
        with self._lock:
            return self._idle

    def submit(self, name: str, job: Callable[[], None]) -> None:
        """Run `job` on a kept thread named `name` while it runs; never waits for the job.

        The runners catch what their work raises; anything that still escapes a job is logged
        and the thread is kept.
        """
        with self._lock:
            start = self._idle == 0
            if start:
                self._started += 1
            else:
                self._idle -= 1
        self._jobs.put((name, job))
        if start:
            threading.Thread(target=self._serve, name=_IDLE_NAME, daemon=True).start()

    def _serve(self) -> None:
        current = threading.current_thread()
        while True:
            name, job = self._jobs.get()
            current.name = name
            try:
                job()
            except BaseException as exc:  # noqa: BLE001  # a kept thread must outlive its jobs
                log_event(logger, logging.ERROR, "worker.thread_job_failed", job=name, exc_info=exc)
            finally:
                # Drop the job before waiting for the next: what it holds (a runner, a pipe) is
                # released now, not when the next job comes.
                del job
                current.name = _IDLE_NAME
                with self._lock:
                    self._idle += 1


# One set per process: every worker in it shares the kept threads.
REUSED_THREADS: Final = ReusedThreads()
