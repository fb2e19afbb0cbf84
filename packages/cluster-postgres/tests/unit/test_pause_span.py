"""`plan_span`: which occurrences of a paused span a resume records, per replay (pure).

An hourly schedule in UTC, paused from 01:00 to 04:30 on a day: 01:00, 02:00, 03:00 and 04:00
fell due. The expected ranges are plain arithmetic on those hours.
"""

from __future__ import annotations

import pytest
from ql3_cluster_postgres._pause_span import Replay, SpanPlan, plan_span, replay_of
from ql3_runtime_core import InvalidArgumentError, ScheduleDefinition, wheel_zone_rules

HOUR = 3_600_000
DAY = 1_798_761_600_000  # 2027-01-01T00:00:00Z
HOURLY = ScheduleDefinition(cron="0 * * * *")


@pytest.mark.parametrize(
    ("replay", "plan"),
    [
        (Replay.SKIP, SpanPlan(DAY + HOUR, DAY + 4 * HOUR, 4, DAY + 5 * HOUR, "active")),
        (Replay.FIRE_ONCE, SpanPlan(DAY + HOUR, DAY + 3 * HOUR, 3, DAY + 4 * HOUR, "active")),
        (Replay.CATCH_UP, SpanPlan(None, None, 0, DAY + HOUR, "active")),
    ],
)
def test_each_replay_records_what_it_does_not_hand_back(replay: Replay, plan: SpanPlan) -> None:
    """skip: all four; fire_once: the three before the latest; catch_up: none."""
    rules = wheel_zone_rules()
    assert plan_span(HOURLY, DAY + HOUR, DAY + 4 * HOUR + HOUR // 2, replay, rules) == plan


def test_a_span_with_one_occurrence_or_none() -> None:
    """fire_once of one occurrence records nothing; a span nothing fell due in keeps the cursor."""
    rules = wheel_zone_rules()
    one = plan_span(HOURLY, DAY + HOUR, DAY + HOUR + 5, Replay.FIRE_ONCE, rules)
    assert one == SpanPlan(None, None, 0, DAY + HOUR, "active")
    none = plan_span(HOURLY, DAY + HOUR, DAY + HOUR - 5, Replay.SKIP, rules)
    assert none == SpanPlan(None, None, 0, DAY + HOUR, "active")


def test_the_window_bounds_the_span_and_can_exhaust_the_schedule() -> None:
    """Occurrences after end_at are none of the span's; nothing left after it: exhausted."""
    rules = wheel_zone_rules()
    ending = HOURLY.model_copy(update={"end_at_ms": DAY + 2 * HOUR})
    plan = plan_span(ending, DAY + HOUR, DAY + 4 * HOUR, Replay.SKIP, rules)
    assert plan == SpanPlan(DAY + HOUR, DAY + 2 * HOUR, 2, None, "exhausted")


def test_an_unknown_replay_is_refused_by_name() -> None:
    """The message names `replay` and the choices."""
    with pytest.raises(InvalidArgumentError) as caught:
        replay_of("all")
    assert caught.value.argument == "replay"
