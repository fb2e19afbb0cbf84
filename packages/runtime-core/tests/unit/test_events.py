"""`log_event`: one record per fact, its message the stable event name, every value once."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ql3_runtime_core import EVENT_FIELD, log_event

if TYPE_CHECKING:
    import pytest


def test_the_event_is_the_message_and_the_values_are_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The message is the event name; fields ride as record attributes, nothing repeated."""
    logger = logging.getLogger("ql3.test.events")
    with caplog.at_level(logging.INFO, logger="ql3.test.events"):
        log_event(logger, logging.WARNING, "commit.reply_lost", fenced=3, schedule_id=7)
    (record,) = caplog.records
    assert record.getMessage() == "commit.reply_lost"
    assert getattr(record, EVENT_FIELD) == "commit.reply_lost"
    assert vars(record)["fenced"] == 3
    assert vars(record)["schedule_id"] == 7
    assert record.levelno == logging.WARNING
    assert record.funcName == "test_the_event_is_the_message_and_the_values_are_fields"


def test_a_disabled_level_builds_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Below the logger's level no record is made."""
    logger = logging.getLogger("ql3.test.events.quiet")
    with caplog.at_level(logging.WARNING, logger="ql3.test.events.quiet"):
        log_event(logger, logging.DEBUG, "claim.acquired", schedule_id=1)
    assert caplog.records == []


def test_an_exception_travels_with_the_record(caplog: pytest.LogCaptureFixture) -> None:
    """`exc_info` attaches the exception for the renderer."""
    logger = logging.getLogger("ql3.test.events.error")
    error = ValueError("bad row")
    with caplog.at_level(logging.ERROR, logger="ql3.test.events.error"):
        log_event(logger, logging.ERROR, "schedule.decision_failed", exc_info=error)
    (record,) = caplog.records
    assert record.exc_info is not None
    assert record.exc_info[1] is error
