"""The execution models (DESIGN §10): bounds named by field, commands a shell runs as written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from ql3_runtime_core import (
    COMMAND_MAX_LENGTH,
    MAX_ATTEMPTS_MAX,
    OUTPUT_TAIL_MAX_CHARS,
    RETRY_BACKOFF_MS_MAX,
    TIMEOUT_MS_MAX,
    TIMEOUT_MS_MIN,
    AttemptOutcome,
    AttemptResult,
    TakenAttempt,
    TaskExecution,
)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_attempts", 0, f"max_attempts: must be within 1..{MAX_ATTEMPTS_MAX}"),
        ("max_attempts", MAX_ATTEMPTS_MAX + 1, "max_attempts: must be within"),
        ("timeout_ms", TIMEOUT_MS_MIN - 1, f"timeout_ms: must be within {TIMEOUT_MS_MIN}.."),
        ("timeout_ms", TIMEOUT_MS_MAX + 1, f"..{TIMEOUT_MS_MAX} \\(ms\\)"),
        ("retry_backoff_ms", -1, "retry_backoff_ms: must be within 0.."),
        ("retry_backoff_ms", RETRY_BACKOFF_MS_MAX + 1, "retry_backoff_ms: must be within"),
        ("command", "", "command: must not be empty or blank"),
        ("command", " \t\n", "command: must not be empty or blank"),
        ("command", "x" * (COMMAND_MAX_LENGTH + 1), f"command: at most {COMMAND_MAX_LENGTH}"),
        ("command", "echo a\x00b", "command: must not contain a NUL"),
    ],
)
def test_out_of_bound_values_are_refused_naming_the_field(
    field: str, value: object, message: str
) -> None:
    """Every bound of a task's execution is refused with its field and range in the message."""
    with pytest.raises(ValidationError, match=message):
        TaskExecution.model_validate({field: value})


def test_the_bounds_themselves_are_accepted() -> None:
    """The extremes are valid values, and a command is kept exactly as written."""
    low = TaskExecution(
        command=" x ", max_attempts=1, timeout_ms=TIMEOUT_MS_MIN, retry_backoff_ms=0
    )
    high = TaskExecution(
        command="y" * COMMAND_MAX_LENGTH,
        max_attempts=MAX_ATTEMPTS_MAX,
        timeout_ms=TIMEOUT_MS_MAX,
        retry_backoff_ms=RETRY_BACKOFF_MS_MAX,
    )
    assert low.command == " x "
    assert len(high.command or "") == COMMAND_MAX_LENGTH
    assert TaskExecution().command is None


def test_result_tail_is_bounded() -> None:
    """A worker's output tail may hold OUTPUT_TAIL_MAX_CHARS characters, not one more."""
    AttemptResult(outcome=AttemptOutcome.FAILED, output_tail="z" * OUTPUT_TAIL_MAX_CHARS)
    with pytest.raises(ValidationError, match="output_tail"):
        AttemptResult(outcome=AttemptOutcome.FAILED, output_tail="z" * (OUTPUT_TAIL_MAX_CHARS + 1))


@pytest.mark.parametrize(("eligible", "taken", "delay"), [(100, 350, 250), (400, 350, 0)])
def test_queue_delay_is_database_time_never_negative(eligible: int, taken: int, delay: int) -> None:
    """The queue delay is taken minus eligible, database times; a clock step back reads as 0."""
    attempt = TakenAttempt(
        attempt_id=1,
        run_id=1,
        schedule_id=1,
        task_id=1,
        task_name="t",
        attempt_number=1,
        scheduled_for_ms=0,
        payload={},
        execution=TaskExecution(),
        created_at_ms=eligible,
        eligible_at_ms=eligible,
        taken_at_ms=taken,
        lease_expires_at_ms=taken + 1_000,
    )
    assert attempt.queue_delay_ms == delay
