"""Execution of admitted runs (DESIGN §10): what a task runs, the attempt a worker holds, protocol.

A Run is admitted once; its attempts execute it. A worker *takes* a queued attempt (it becomes
`running` under the worker's lease token with a lease expiring at database time + lease), keeps the
lease alive with heartbeats, and *finishes* it (`succeeded`, `failed`, `timed_out`). An attempt that
does not succeed is followed, while attempts remain, by the next one, queued not before database
time + the task's retry backoff, in the same statement. A worker that dies leaves its lease to
expire by the database clock; any worker then marks the attempt `abandoned` and queues the next
one. A worker that stops gracefully *releases* what it could not finish: the attempt goes back to
`queued` (same number, eligible at once). At most one attempt of a Run is live (queued or
running) at any time: the database refuses a second.

Rule zero: no value here is a node time. Lease expiries, retry times and every recorded time are
the database's `clock_timestamp()`; a worker measures only how long to wait (heartbeat cadence, a
command's timeout) with `time.monotonic()`.

This module holds the models and the `WorkerRepository` protocol, in the lowest layer, so the
PostgreSQL ingress that implements it and the worker that calls it depend on this package only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Final, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from uuid import UUID

__all__ = [
    "ATTEMPT_KILL_MARGIN_MS",
    "ATTEMPT_SUCCESSOR_GRACE_MS",
    "COMMAND_MAX_LENGTH",
    "MAX_ATTEMPTS_DEFAULT",
    "MAX_ATTEMPTS_MAX",
    "MAX_RUNNING_MAX",
    "OUTPUT_TAIL_MAX_CHARS",
    "RETRY_BACKOFF_MS_DEFAULT",
    "RETRY_BACKOFF_MS_MAX",
    "TIMEOUT_MS_DEFAULT",
    "TIMEOUT_MS_MAX",
    "TIMEOUT_MS_MIN",
    "AbandonedAttempt",
    "AttemptOutcome",
    "AttemptResult",
    "AttemptState",
    "FinishedAttempt",
    "OverlapPolicy",
    "TakenAttempt",
    "TaskExecution",
    "WorkerRepository",
]

# Each bound is the database's CHECK of the same column (migration 0005), so the API, the CLI and
# the database refuse the same values.
# Attempts per Run, first included: 1 runs once, never retried.
MAX_ATTEMPTS_MAX: Final = 100
MAX_ATTEMPTS_DEFAULT: Final = 3
# How long one attempt may run: 1 s to 1 day.
TIMEOUT_MS_MIN: Final = 1_000
TIMEOUT_MS_MAX: Final = 86_400_000
TIMEOUT_MS_DEFAULT: Final = 3_600_000
# Database time between an attempt's end and its successor's earliest start: 0 to 1 day.
RETRY_BACKOFF_MS_MAX: Final = 86_400_000
RETRY_BACKOFF_MS_DEFAULT: Final = 10_000
# Live Runs of one schedule its overlap policy allows at once (tasks_max_running, migration 0009).
MAX_RUNNING_MAX: Final = 1_000
# A shell command line; far below the kernel's single-argument limit (128 KiB).
COMMAND_MAX_LENGTH: Final = 8_192
# The tail of a command's output (or a Python task's error) kept on the attempt.
OUTPUT_TAIL_MAX_CHARS: Final = 4_096

# One Run's command never runs in two places at once. A worker that cannot renew a lease starts
# killing the command's process group this long before the lease can have expired, measured
# with `time.monotonic()` from when the last acknowledged renewal (or the take) was sent, which
# is no later than the database clock reading that set the expiry: SIGTERM, SIGKILL 2 000 ms
# later, and 1 000 ms for the runner's polling, scheduling, signal delivery and reaping.
ATTEMPT_KILL_MARGIN_MS: Final = 3_000
# Database time after an abandoned attempt's lease expiry before its successor may start
# (`ql3.attempt_successor_grace_ms()`, migration 0007). It covers the kill margin again, for a
# worker that noticed its loss only at the expiry, plus 2 000 ms for a stalled worker and for
# the difference between the database clock and the worker's monotonic clock.
ATTEMPT_SUCCESSOR_GRACE_MS: Final = 5_000

_MODEL = ConfigDict(frozen=True, extra="forbid")


class AttemptState(StrEnum):
    """Where an attempt is in its life (`ql3.attempts.state`).

    - `QUEUED`: waiting for a worker, not before its `not_before` time (database time).
    - `RUNNING`: held by one worker under a lease that expires by the database clock.
    - `SUCCEEDED`: the command exited 0 (the Python callable returned).
    - `FAILED`: the command exited non-zero (the callable raised).
    - `TIMED_OUT`: it ran past the task's timeout; the worker killed its process group.
    - `ABANDONED`: its lease expired by the database clock (the worker died or lost the
      database); another worker recorded that.
    - `SKIPPED`: never started: the take found the schedule's cap of live Runs reached under the
      overlap policy `skip` (DESIGN §10).
    - `CANCELLED`: ended by the take of a newer Run under the overlap policy `replace`; its
      worker kills the command when its next renewal is refused.
    All but the first two are final. `QUEUED` and `RUNNING` are *live*: a Run has at most one
    live attempt.
    """

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABANDONED = "abandoned"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class AttemptOutcome(StrEnum):
    """How a worker saw an attempt end; recorded as the attempt's final state.

    `SUCCEEDED` (exit 0 / returned), `FAILED` (non-zero exit / raised), `TIMED_OUT` (killed at the
    task's timeout). `abandoned` is never reported by the worker that ran it: another worker
    records it when the lease expired.
    """

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


def _bounded(field: str, low: int, high: int, unit: str) -> AfterValidator:
    def check(value: int) -> int:
        if not low <= value <= high:
            msg = f"{field}: must be within {low}..{high} ({unit}), got {value}"
            raise ValueError(msg)
        return value

    return AfterValidator(check)


def _check_command(value: str | None) -> str | None:
    """Refuse a command no shell would run as written: empty, blank, too long, holding NUL."""
    if value is None:
        return None
    if not value.strip():
        msg = f"command: must not be empty or blank, got {value!r}"
        raise ValueError(msg)
    if len(value) > COMMAND_MAX_LENGTH:
        msg = f"command: at most {COMMAND_MAX_LENGTH} characters, got {len(value)}"
        raise ValueError(msg)
    if "\x00" in value:
        msg = "command: must not contain a NUL character"
        raise ValueError(msg)
    return value


class OverlapPolicy(StrEnum):
    """What a Run due to start does while its schedule's cap of live Runs is reached (DESIGN §10).

    `ALLOW` waits for a slot (with no cap: never waits, every Run executes at once), `SKIP` never
    executes (its attempt ends `skipped`, a cron occurrence gets a skip record of reason
    `overlap`), `REPLACE` cancels the oldest live Run's attempt and executes.
    """

    ALLOW = "allow"
    SKIP = "skip"
    REPLACE = "replace"


class TaskExecution(BaseModel):
    """How the attempts of a task's runs execute; stored on the task (migration 0005).

    `command` is run with `/bin/sh -c`; None makes the task a Python task, run by a worker that
    registered a callable under the task's name. `max_attempts` counts the first attempt;
    `timeout_ms` ends an attempt that runs longer; `retry_backoff_ms` is the database time from an
    attempt's end to the earliest start of its successor. `overlap` and `max_running` are the
    overlap policy and the cap of live Runs of its schedule (None: no cap, only under `allow`;
    `skip` and `replace` default to 1).
    """

    model_config = _MODEL

    command: Annotated[str | None, AfterValidator(_check_command)] = None
    max_attempts: Annotated[int, _bounded("max_attempts", 1, MAX_ATTEMPTS_MAX, "attempts")] = (
        MAX_ATTEMPTS_DEFAULT
    )
    timeout_ms: Annotated[int, _bounded("timeout_ms", TIMEOUT_MS_MIN, TIMEOUT_MS_MAX, "ms")] = (
        TIMEOUT_MS_DEFAULT
    )
    retry_backoff_ms: Annotated[
        int, _bounded("retry_backoff_ms", 0, RETRY_BACKOFF_MS_MAX, "ms")
    ] = RETRY_BACKOFF_MS_DEFAULT
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    max_running: int | None = Field(default=None, validate_default=True)

    @field_validator("max_running", mode="after")
    @classmethod
    def _cap(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Bound the cap; give `skip` and `replace` their default cap of one live Run."""
        if value is None:
            overlap = info.data.get("overlap", OverlapPolicy.ALLOW)
            return None if overlap is OverlapPolicy.ALLOW else 1
        if isinstance(value, bool) or not 1 <= value <= MAX_RUNNING_MAX:
            msg = f"max_running: must be within 1..{MAX_RUNNING_MAX} (runs), got {value}"
            raise ValueError(msg)
        return value


class TakenAttempt(BaseModel):
    """An attempt a worker took: now `running` under its lease, with what it must execute.

    Times are the database's: `eligible_at_ms` is when it could first be taken (its admission, or
    the retry's not-before time), `taken_at_ms` the take statement's clock, `lease_expires_at_ms`
    that plus the lease. `task_name` is also the schedule's name.
    """

    model_config = _MODEL

    attempt_id: int
    run_id: int
    schedule_id: int
    task_id: int
    task_name: str
    attempt_number: int
    scheduled_for_ms: int
    payload: dict[str, Any]
    execution: TaskExecution
    created_at_ms: int
    eligible_at_ms: int
    taken_at_ms: int
    lease_expires_at_ms: int

    @property
    def queue_delay_ms(self) -> int:
        """Database time it waited after becoming eligible (0 if the clock went back)."""
        return max(self.taken_at_ms - self.eligible_at_ms, 0)


class AttemptResult(BaseModel):
    """What a worker reports when an attempt it holds ends.

    `exit_code` is the process's return code (negative: killed by that signal, as Python reports
    it; None for a Python task); `output_tail` the last characters of its output (or the error).
    """

    model_config = _MODEL

    outcome: AttemptOutcome
    exit_code: int | None = None
    output_tail: Annotated[str, Field(max_length=OUTPUT_TAIL_MAX_CHARS)] = ""


class FinishedAttempt(BaseModel):
    """The answer to a finish: recorded, or not (the worker no longer held the attempt).

    `state_found` is the attempt's state as the finish found it (None: no such attempt):
    `running` when recorded. When `recorded`, `finished_at_ms` is the database time of the
    statement, and when it queued a successor, `next_attempt_id` / `next_not_before_ms` name
    it. When not recorded, `state_found` says why and `ended_by_this_lease` tells whether the
    take under this lease token (and login) is the one that ended it: a retried finish whose
    first answer was lost finds its own record.
    """

    model_config = _MODEL

    attempt_id: int
    recorded: bool
    finished_at_ms: int | None = None
    next_attempt_id: int | None = None
    next_not_before_ms: int | None = None
    state_found: AttemptState | None = None
    ended_by_this_lease: bool = False


class AbandonedAttempt(BaseModel):
    """An attempt whose lease expired by the database clock, marked abandoned by a worker."""

    model_config = _MODEL

    attempt_id: int
    run_id: int
    attempt_number: int
    worker_id: str | None
    lease_expired_at_ms: int
    abandoned_at_ms: int
    next_attempt_id: int | None = None
    next_not_before_ms: int | None = None


class WorkerRepository(Protocol):
    """What a worker needs from storage. Every time it involves is the store's own clock.

    The PostgreSQL implementation is `ql3_cluster_postgres.WorkerIngress` (role
    `ql3_worker_ingress`). Each method is one statement; each state change appends its event in
    that statement.
    """

    def check_schema(self) -> int:
        """Return the schema version; raise when it is not the one this build expects."""
        ...

    def take_attempts(
        self,
        *,
        worker_id: str,
        lease_token: UUID,
        lease_ms: int,
        limit: int,
        python_tasks: Sequence[str] = (),
        commands: bool = True,
    ) -> list[TakenAttempt]:
        """Take up to `limit` eligible queued attempts (SKIP LOCKED), oldest eligible first.

        Only attempts of command tasks (when `commands`) and of Python tasks named in
        `python_tasks` are taken; each becomes running under `lease_token` until database time
        + `lease_ms`.
        """
        ...

    def renew_leases(
        self, lease_token: UUID, attempt_ids: Sequence[int], lease_ms: int
    ) -> dict[int, int]:
        """Extend the leases still held and not expired by the database clock.

        Returns attempt id -> new expiry for each renewed one; an id missing from the answer is
        lost (expired, abandoned or released): its worker must stop executing it.
        """
        ...

    def settle_taken_attempts(
        self, worker_id: str, lease_token: UUID, known_attempt_ids: Sequence[int]
    ) -> list[int]:
        """Settle takes whose answer was lost or acknowledged only by a server that may lose it.

        After a durability barrier (facts read next survive a failover), hand back every
        attempt held under `lease_token` that is not in `known_attempt_ids` (taken, but the
        worker never learned it and runs nothing for it): queued again, same number, no
        attempt used up. Returns the ids handed back. Raises `RepositoryUnavailableError` while
        it cannot settle; the worker tries again before it takes anything more.
        """
        ...

    def finish_attempt(
        self,
        attempt_id: int,
        lease_token: UUID,
        result: AttemptResult,
        *,
        settle: bool = False,
    ) -> FinishedAttempt:
        """Record how a held attempt ended and, if it did not succeed, queue its successor.

        Accepted while the attempt is still running under `lease_token` (not yet abandoned);
        otherwise nothing is written and `recorded` is False. A finish whose answer was lost,
        or acknowledged only by a server that may lose it, raises `RepositoryUnavailableError`;
        retry it with `settle=True`: a durability barrier first, so an answer saying it was
        already recorded is read from facts a failover keeps.
        """
        ...

    def finish_in_transaction(
        self,
        attempt_id: int,
        lease_token: UUID,
        work: Callable[[Any], object],
        *,
        timeout_ms: int,
    ) -> FinishedAttempt:
        """Run `work(connection)` and record the attempt succeeded in the same transaction.

        The task's writes on that connection and its success commit together, or neither does:
        when the finish is refused (the attempt is no longer held under `lease_token`), the
        transaction rolls back and `recorded` is False. What `work` raises rolls it back too and
        is raised again (the attempt is then to be recorded failed). A lost or unsafe commit
        answer raises `RepositoryUnavailableError`: settle it with `finish_attempt(...,
        settle=True)`, which finds the success if it landed.
        """
        ...

    def release_attempts(
        self, worker_id: str, lease_token: UUID, attempt_ids: Sequence[int]
    ) -> list[int]:
        """Put attempts held under `lease_token` back to queued (graceful stop); their ids."""
        ...

    def abandon_expired_attempts(self, limit: int) -> list[AbandonedAttempt]:
        """Mark up to `limit` running attempts whose lease expired (database clock) abandoned.

        Each gets its successor queued (after the backoff) while attempts remain, in the same
        statement.
        """
        ...

    def close(self) -> None:
        """Close every connection; the repository may reconnect if used again."""
        ...
