"""Running one taken attempt: the runner every attempt gets, and the one for shell commands.

Each runner has one control thread (a kept one, `_threads`). A command runs as
`/bin/sh -c COMMAND` in a new session (`start_new_session`), so its whole process group can be
signalled: at the task's timeout, when its lease is lost, or when a stopping worker hands it
back. Ending a group is SIGTERM, then SIGKILL after `KILL_GRACE_S`; and whatever a command left
running in its group when its shell exits is killed too (the group is signalled before the
shell is reaped, so its id cannot have been reused). A job that must outlive its attempt has to
start its own session.

One Run's command never runs in two places at once. A runner whose lease the database has not
confirmed for a while (the database unreachable, or the worker's loop stuck in a call) starts
ending its command `ATTEMPT_KILL_MARGIN_MS` before the lease can have expired, measured with
`time.monotonic()` from when the last statement that confirmed the lease (the take, or a renewal
whose commit was acknowledged cleanly) was sent. The database set that expiry from its own clock
when it executed the statement, which is after the send, so SIGKILL reaches the group at least
1 s (the margin minus `KILL_GRACE_S`) before the lease can end; and the database queues an
abandoned attempt's successor no earlier than its expiry plus `ATTEMPT_SUCCESSOR_GRACE_MS`.
What stays out of reach: a worker that is itself stopped (SIGSTOP, a frozen VM) kills nothing;
its process group lives on (see the operations guide).

Python tasks run in a thread of the worker (`_python_runner`). Timeouts are measured with
`time.monotonic()`; the time recorded for the end is the database's, taken by the statement that
records it (rule zero).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeAlias

from ql3_runtime_core import (
    ATTEMPT_KILL_MARGIN_MS,
    AttemptOutcome,
    AttemptResult,
    log_event,
)

from ql3_cluster_control._tracing import span, traceparent

from ._command_output import CommandOutput, output_tail
from ._recorder import attempt_ids
from ._threads import REUSED_THREADS

if TYPE_CHECKING:
    from ql3_runtime_core import TakenAttempt

__all__ = [
    "KILL_GRACE_S",
    "KILL_MARGIN_S",
    "AttemptRunner",
    "CommandRunner",
    "Recorder",
]

logger = logging.getLogger(__name__)

# SIGTERM first, so a command may clean up; SIGKILL this long after, whatever it does.
KILL_GRACE_S: Final = 2.0
# A command whose lease is unconfirmed starts being ended this long before the lease can end.
KILL_MARGIN_S: Final = ATTEMPT_KILL_MARGIN_MS / 1000
# How often a running command or callable is looked at (timeout, kill requests).
POLL_S: Final = 0.05
# Without a pidfd (`_command_output`), a command is first looked at this soon after it starts,
# then twice as late each time up to POLL_S: a short command (`true` takes a few ms) is seen
# ended within about its own run time instead of a whole POLL_S later, which would cap a slot at
# 20 short commands a second.
_FIRST_LOOK_S: Final = 0.001
_SHELL: Final = "/bin/sh"


# The worker's way to record how a runner's attempt ended (with its retries); `settle` when
# the end may already be recorded (a transaction whose commit answer was lost).
Recorder: TypeAlias = Callable[["AttemptRunner", AttemptResult, bool], None]


class AttemptRunner(ABC):
    """Executes one taken attempt on its own thread; the worker watches its events.

    `settled` is set once the attempt no longer needs its lease (its end is recorded or refused,
    its lease is lost, or it is ready to be released: `needs_release`); `done` once the runner
    no longer occupies a slot. `outcome` is how it ended for this worker (see `OUTCOMES`).
    `lease_confirmed_at` is the monotonic time the last take or heartbeat that confirmed its
    lease was sent; `lease_s` the lease; `kill_at` when, without a newer confirmation, the
    command starts being ended.
    """

    def __init__(
        self,
        attempt: TakenAttempt,
        *,
        worker_id: str,
        record: Recorder,
        on_done: Callable[[], None],
        confirmed_at: float,
        lease_s: float,
    ) -> None:
        self.attempt = attempt
        self.worker_id = worker_id
        self.lease_confirmed_at = confirmed_at
        self.lease_s = lease_s
        self.settled = threading.Event()
        self.done = threading.Event()
        self.needs_release = False
        self.outcome: str | None = None
        self.lost_reason: str | None = None
        self._record = record
        self._on_done = on_done
        self._release = threading.Event()
        self._lost = threading.Event()

    def start(self) -> None:
        """Begin executing on a kept thread (`_threads`); returns at once."""
        REUSED_THREADS.submit(f"ql3-attempt-{self.attempt.attempt_id}", self._main)

    def request_release(self) -> None:
        """Stop executing (kill the command) so the worker can hand the attempt back."""
        self._release.set()

    def lose(self, reason: str) -> None:
        """Stop executing: the lease is over, another worker will run the Run (logged once)."""
        if self._lost.is_set():
            return
        self.lost_reason = reason
        self._lost.set()
        log_event(
            logger,
            logging.WARNING,
            "attempt.lost",
            attempt_id=self.attempt.attempt_id,
            run_id=self.attempt.run_id,
            attempt=self.attempt.attempt_number,
            task=self.attempt.task_name,
            reason=reason,
        )

    def confirm(self, sent_at: float) -> None:
        """Count the lease confirmed as of `sent_at` (monotonic send time); never move it back."""
        self.lease_confirmed_at = max(self.lease_confirmed_at, sent_at)

    @property
    def kill_at(self) -> float:
        """The monotonic time at which an unconfirmed lease makes the runner end its work."""
        return self.lease_confirmed_at + self.lease_s - KILL_MARGIN_S

    def _lease_lost(self) -> bool:
        """Whether the lease is lost: told so, or unconfirmed up to the kill margin (monotonic)."""
        if not self._lost.is_set() and time.monotonic() >= self.kill_at:
            unconfirmed_ms = (self.lease_s - KILL_MARGIN_S) * 1000
            self.lose(
                f"no heartbeat confirmed its lease for {unconfirmed_ms:.0f} ms"
                f" (lease {self.lease_s * 1000:.0f} ms, kill margin {KILL_MARGIN_S * 1000:.0f} ms)"
            )
        return self._lost.is_set()

    def record(self, result: AttemptResult, *, settle: bool = False) -> None:
        """Have the worker record `result`, then settle."""
        self._record(self, result, settle)
        self.settled.set()

    def _main(self) -> None:
        try:
            attempt = self.attempt
            # Logged here, not by the loop that took it: the loop's thread is the one every
            # attempt of the worker waits on, and a record costs about as much as starting one.
            log_event(
                logger,
                logging.INFO,
                "attempt.taken",
                **attempt_ids(attempt),
                queue_delay_ms=attempt.queue_delay_ms,
                lease_expires_at_ms=attempt.lease_expires_at_ms,
            )
            with span(
                "ql3.execute",
                run_id=attempt.run_id,
                attempt_id=attempt.attempt_id,
                attempt=attempt.attempt_number,
                schedule=attempt.task_name,
            ):
                self._execute()
        except Exception as exc:  # noqa: BLE001  # a runner must always settle, or the worker waits on it
            log_event(
                logger,
                logging.ERROR,
                "attempt.runner_failed",
                attempt_id=self.attempt.attempt_id,
                exc_info=exc,
            )
        finally:
            self.settled.set()
            self.done.set()
            self._on_done()

    @abstractmethod
    def _execute(self) -> None:
        """Run the attempt and settle it (record, lose or get ready for release)."""


class CommandRunner(AttemptRunner):
    """Runs a command task with `/bin/sh -c` in its own process group."""

    def _execute(self) -> None:
        command = self.attempt.execution.command
        if command is None:  # pragma: no cover - the take statement hands out commands only
            raise RuntimeError("CommandRunner given a Python task")
        deadline = time.monotonic() + self.attempt.execution.timeout_ms / 1000
        try:
            # The command is the task's definition, written by an operator (ql3_admin), run as
            # the shell would run it: that is what a command task is.
            process = subprocess.Popen(  # noqa: S603
                [_SHELL, "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        except OSError as exc:
            text = f"ql3: cannot start {_SHELL}: {exc}"
            self.record(
                AttemptResult(outcome=AttemptOutcome.FAILED, output_tail=output_tail(text.encode()))
            )
            return
        if process.stdout is None:  # pragma: no cover - stdout=PIPE always gives one
            raise RuntimeError("no output pipe")
        output = CommandOutput(
            process.pid, process.stdout, name=f"ql3-output-{self.attempt.attempt_id}"
        )
        try:
            ended_by = self._wait(process.pid, deadline, output)
            # Whatever is left in the group goes with the shell; signalled before the reap.
            _signal_group(process.pid, signal.SIGKILL)
            code = process.wait()
            # What came in time; a pipe a grandchild still holds is left to a reader (see there).
            tail = output.finish()
        finally:
            output.close()
        self._settle(ended_by, code, tail)

    def _settle(self, ended_by: str | None, code: int, tail: str) -> None:
        if ended_by == "release":
            self.needs_release, self.outcome = True, "released"
            self.settled.set()
        elif ended_by == "lost":
            self.outcome = "lost"
            self.settled.set()
        else:
            if ended_by == "timeout":
                outcome = AttemptOutcome.TIMED_OUT
            else:
                outcome = AttemptOutcome.SUCCEEDED if code == 0 else AttemptOutcome.FAILED
            self.record(AttemptResult(outcome=outcome, exit_code=code, output_tail=tail))

    def _wait(self, pid: int, deadline: float, output: CommandOutput) -> str | None:
        """Wait for the shell's exit (not reaping it), reading its output; None, or why it ended.

        None when the shell exited on its own, else the reason its group was ended. With a pidfd
        the exit ends the wait at once; the time limit, a release and the lease are looked at
        every `POLL_S`. Without one the exit is looked for soon after the start, then twice as
        late each time up to `POLL_S`.
        """
        step = POLL_S if output.sees_exit else _FIRST_LOOK_S
        while not _exited(pid):
            reason = None
            if time.monotonic() >= deadline:
                reason = "timeout"
            elif self._release.is_set():
                reason = "release"
            elif self._lease_lost():
                reason = "lost"
            if reason is not None:
                _end_group(pid, output.wait)
                return reason
            output.wait(min(step, max(0.0, deadline - time.monotonic())))
            step = min(step * 2, POLL_S)
        return None

    def environment(self) -> dict[str, str]:
        """Return the worker's environment without its own `QL3_*` settings, plus the run's.

        The worker's settings (its DSN above all) are not the command's business; the run is.
        """
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("QL3_")}
        attempt = self.attempt
        env.update(
            QL3_RUN_ID=str(attempt.run_id),
            QL3_ATTEMPT=str(attempt.attempt_number),
            QL3_SCHEDULED_FOR_MS=str(attempt.scheduled_for_ms),
            QL3_SCHEDULE=attempt.task_name,
            QL3_TASK_PAYLOAD=json.dumps(attempt.payload, sort_keys=True, separators=(",", ":")),
        )
        # The execution span's context (the `otel` extra): the command's own spans join it.
        parent = traceparent()
        if parent is not None:
            env["TRACEPARENT"] = parent
        return env


def _exited(pid: int) -> bool:
    """Whether child `pid` has exited, leaving it unreaped (WNOWAIT) so its group id stays ours."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _end_group(pid: int, pause: Callable[[float], None]) -> None:
    """SIGTERM the command's group; SIGKILL it if the shell is still there after the grace.

    `pause` waits between looks (reading the output meanwhile: a command writing as it cleans
    up must not block on a full pipe).
    """
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while not _exited(pid) and time.monotonic() < deadline:
        pause(min(POLL_S, max(0.0, deadline - time.monotonic())))
    _signal_group(pid, signal.SIGKILL)
