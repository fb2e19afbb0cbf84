"""The quarantine and zone-rules outcomes of the repository protocol (no database)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from ql3_runtime_core import (
    QUARANTINE_REASON_MAX_LENGTH,
    InvalidCronError,
    ScheduleDefinition,
    ZoneRulesCheck,
    quarantine_reason,
)


def test_reason_names_the_error_and_the_bad_value_on_one_line() -> None:
    """A validation failure becomes one line naming the error class, the field and the value."""
    with pytest.raises(ValidationError) as caught:
        ScheduleDefinition(cron="every tuesday")
    reason = quarantine_reason(caught.value)
    assert reason.startswith("ValidationError: ")
    assert "'every tuesday'" in reason
    assert "\n" not in reason


def test_reason_of_any_exception_keeps_its_type() -> None:
    """An unexpected exception from a decision is described by its type and message."""
    assert quarantine_reason(ZeroDivisionError("division by zero")) == (
        "ZeroDivisionError: division by zero"
    )


def test_reason_is_bounded_for_the_database() -> None:
    """A reason never exceeds the length the database CHECK accepts."""
    reason = quarantine_reason(InvalidCronError("x" * 5000, "too long"))
    assert len(reason) == QUARANTINE_REASON_MAX_LENGTH
    assert reason.endswith("...")


@pytest.mark.parametrize(
    ("local", "recorded", "agrees"),
    [("2026.6", "2026.6", True), ("2026.6", "2025.1", False), ("2026.6", None, False)],
)
def test_zone_rules_agree_only_on_the_same_recorded_version(
    local: str, recorded: str | None, *, agrees: bool
) -> None:
    """A replica agrees with the store only when a version is recorded and it is its own."""
    assert ZoneRulesCheck(local_version=local, recorded_version=recorded).agrees is agrees
