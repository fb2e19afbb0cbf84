"""A taken attempt built in memory, and a command runner run to its end, without a database."""

from __future__ import annotations

import time
from typing import Any

from ql3_cluster_control.worker._attempt_runner import CommandRunner
from ql3_runtime_core import AttemptResult, TakenAttempt, TaskExecution


def taken_attempt(
    command: str | None, *, timeout_ms: int | None = None, **fields: Any
) -> TakenAttempt:
    """Return attempt 2 of run 7 ("nightly backup"), running `command`; `fields` override."""
    execution = TaskExecution(command=command)
    if timeout_ms is not None:
        execution = TaskExecution(command=command, timeout_ms=timeout_ms)
    values: dict[str, Any] = {
        "attempt_id": 11,
        "run_id": 7,
        "schedule_id": 3,
        "task_id": 3,
        "task_name": "nightly backup",
        "attempt_number": 2,
        "scheduled_for_ms": 1_700_000_000_000,
        "payload": {"b": 1, "a": [1, 2]},
        "execution": execution,
        "created_at_ms": 0,
        "eligible_at_ms": 0,
        "taken_at_ms": 0,
        "lease_expires_at_ms": 30_000,
    }
    values.update(fields)
    return TakenAttempt(**values)


def run_command(attempt: TakenAttempt, *, lease_s: float, within_s: float) -> AttemptResult:
    """Run `attempt`'s command on a `CommandRunner` (lease confirmed now); the result it records.

    Fails unless the runner ends within `within_s` (monotonic) having recorded exactly one result.
    """
    recorded: list[tuple[object, ...]] = []
    runner = CommandRunner(
        attempt,
        worker_id="w",
        record=lambda *args: recorded.append(args),
        on_done=lambda: None,
        confirmed_at=time.monotonic(),
        lease_s=lease_s,
    )
    runner.start()
    assert runner.done.wait(within_s), f"the runner did not end within {within_s} s"
    ((_, result, _),) = recorded
    assert isinstance(result, AttemptResult)
    return result
