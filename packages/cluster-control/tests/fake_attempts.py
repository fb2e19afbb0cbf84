"""A taken attempt built in memory, for runner and worker-loop tests that need no database."""

from __future__ import annotations

from typing import Any

from ql3_runtime_core import TakenAttempt, TaskExecution


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
