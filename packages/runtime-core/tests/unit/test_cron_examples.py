"""Fixed cron examples: the DST rules of DESIGN §4 on known days, validation and zone errors."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from cron_cases import wheel_zone
from ql3_runtime_core import (
    EPOCH_MS_MAX,
    EPOCH_MS_MIN,
    PREVIEW_COUNT_MAX,
    InvalidArgumentError,
    InvalidCronError,
    QL3Error,
    UnknownTimezoneError,
    is_interval_like,
    latest_occurrence_ms,
    next_occurrence_ms,
    preview_occurrences,
    validate_cron_expression,
)

NEW_YORK = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"


def ms(zone: str, *wall: int, fold: int = 0) -> int:
    """Return epoch ms of a local wall time (year, month, day, hour, minute[, second])."""
    year, month, day, hour, minute, *rest = wall
    second = rest[0] if rest else 0
    moment = datetime(year, month, day, hour, minute, second, tzinfo=wheel_zone(zone), fold=fold)
    return int(moment.timestamp()) * 1000


def local(zone: str, instants: list[int]) -> list[str]:
    """Render epoch ms as local ISO strings with their offsets."""
    return [datetime.fromtimestamp(t / 1000, wheel_zone(zone)).isoformat() for t in instants]


def between(expression: str, zone: str, start_ms: int, end_ms: int) -> list[int]:
    """Return every occurrence in `[start_ms, end_ms]`."""
    found: list[int] = []
    current = next_occurrence_ms(expression, zone, start_ms - 1)
    while current <= end_ms:
        found.append(current)
        current = next_occurrence_ms(expression, zone, current)
    return found


def test_fixed_time_fires_once_on_new_york_fall_back_day() -> None:
    """`30 1 * * *` fires once on 2026-11-01 in New York, at the first (EDT) 01:30."""
    day = between(
        "30 1 * * *", NEW_YORK, ms(NEW_YORK, 2026, 11, 1, 0, 0), ms(NEW_YORK, 2026, 11, 2, 0, 0)
    )
    assert local(NEW_YORK, day) == ["2026-11-01T01:30:00-04:00"]


def test_fixed_time_in_gap_fires_at_transition_on_spring_forward_day() -> None:
    """`30 2 * * *` fires once at 03:00 EDT on 2026-03-08, when 02:30 does not exist."""
    day = between(
        "30 2 * * *", NEW_YORK, ms(NEW_YORK, 2026, 3, 8, 0, 0), ms(NEW_YORK, 2026, 3, 9, 0, 0)
    )
    assert local(NEW_YORK, day) == ["2026-03-08T03:00:00-04:00"]


def test_gap_and_regular_times_mapping_to_one_instant_fire_once() -> None:
    """02:00, 02:30 (gap) and 03:00 all denote 03:00 EDT on spring-forward day: one occurrence."""
    day = between(
        "0,30 2,3 * * *", NEW_YORK, ms(NEW_YORK, 2026, 3, 8, 0, 0), ms(NEW_YORK, 2026, 3, 8, 23, 0)
    )
    assert local(NEW_YORK, day) == ["2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"]


def test_interval_fires_four_times_in_new_york_fold_hour() -> None:
    """`*/30 * * * *` fires at 01:00 and 01:30 of both EDT and EST on fall-back day."""
    start = ms(NEW_YORK, 2026, 11, 1, 1, 0)
    end = ms(NEW_YORK, 2026, 11, 1, 1, 59, fold=1)
    assert local(NEW_YORK, between("*/30 * * * *", NEW_YORK, start, end)) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
    ]


def test_interval_skips_the_new_york_gap() -> None:
    """`*/30 * * * *` has nothing between 01:30 EST and 03:00 EDT on spring-forward day."""
    start = ms(NEW_YORK, 2026, 3, 8, 1, 30)
    assert local(NEW_YORK, preview_occurrences("*/30 * * * *", NEW_YORK, start - 1, 3)) == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]


def test_seconds_field_follows_absolute_time_through_the_fold() -> None:
    """`0 * 1 * * *` (6 fields) fires every minute of both 01:xx hours on fall-back day."""
    start = ms(NEW_YORK, 2026, 11, 1, 0, 0)
    end = ms(NEW_YORK, 2026, 11, 1, 3, 0)
    assert len(between("0 * 1 * * *", NEW_YORK, start, end)) == 120


def test_six_field_fixed_time_fires_once_in_fold() -> None:
    """`15 30 1 * * *` fires once at 01:30:15 EDT on fall-back day."""
    day = between(
        "15 30 1 * * *", NEW_YORK, ms(NEW_YORK, 2026, 11, 1, 0, 0), ms(NEW_YORK, 2026, 11, 2, 0, 0)
    )
    assert local(NEW_YORK, day) == ["2026-11-01T01:30:15-04:00"]


def test_lord_howe_half_hour_fold_fires_fixed_time_once() -> None:
    """Lord Howe repeats 01:30-02:00 on 2026-04-05: `45 1 * * *` fires once, at +11:00."""
    day = between(
        "45 1 * * *", LORD_HOWE, ms(LORD_HOWE, 2026, 4, 5, 0, 0), ms(LORD_HOWE, 2026, 4, 6, 0, 0)
    )
    assert local(LORD_HOWE, day) == ["2026-04-05T01:45:00+11:00"]


def test_lord_howe_half_hour_fold_fires_interval_twice() -> None:
    """Lord Howe's half-hour fold repeats `*/15` times 01:30 and 01:45 under both offsets."""
    start = ms(LORD_HOWE, 2026, 4, 5, 1, 30)
    assert local(LORD_HOWE, preview_occurrences("*/15 * * * *", LORD_HOWE, start - 1, 5)) == [
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T01:45:00+11:00",
        "2026-04-05T01:30:00+10:30",
        "2026-04-05T01:45:00+10:30",
        "2026-04-05T02:00:00+10:30",
    ]


def test_lord_howe_half_hour_gap_fires_fixed_time_at_transition() -> None:
    """Lord Howe skips 02:00-02:30 on 2026-10-04: `15 2 * * *` fires at 02:30 +11:00."""
    day = between(
        "15 2 * * *", LORD_HOWE, ms(LORD_HOWE, 2026, 10, 4, 0, 0), ms(LORD_HOWE, 2026, 10, 5, 0, 0)
    )
    assert local(LORD_HOWE, day) == ["2026-10-04T02:30:00+11:00"]


def test_next_occurrence_is_strictly_after() -> None:
    """An occurrence exactly at `after_ms` is not returned again; a millisecond earlier it is."""
    at = ms("UTC", 2026, 1, 1, 0, 5)
    assert next_occurrence_ms("*/5 * * * *", "UTC", at) == at + 300_000
    assert next_occurrence_ms("*/5 * * * *", "UTC", at - 1) == at


def test_latest_occurrence_finds_the_last_one_before_a_bound() -> None:
    """latest_occurrence_ms returns the last occurrence in the window, or None if there is none."""
    at = ms("UTC", 2026, 1, 1, 0, 7)
    assert latest_occurrence_ms("*/5 * * * *", "UTC", at, at - 3_600_000) == at - 120_000
    assert latest_occurrence_ms("*/5 * * * *", "UTC", at, at - 60_000) is None


def test_preview_rejects_a_negative_count() -> None:
    """A negative preview count is an InvalidArgumentError (a ValueError) naming `count`."""
    expected = re.escape("count: must be within 0..10000, got -1")
    with pytest.raises(InvalidArgumentError, match=expected) as e:
        preview_occurrences("* * * * *", "UTC", 0, -1)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize(
    ("after_ms", "count", "named"),
    [
        (0, PREVIEW_COUNT_MAX + 1, f"count: must be within 0..{PREVIEW_COUNT_MAX}"),
        (-1, 1, f"after_ms: must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
        (EPOCH_MS_MAX + 1, 1, f"after_ms: must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
        (99_999_999_999_999_999_999, 1, "after_ms: must be within"),
    ],
)
def test_preview_refuses_arguments_out_of_bounds(after_ms: int, count: int, named: str) -> None:
    """A preview start outside the epoch range or too long a preview is refused by name."""
    with pytest.raises(InvalidArgumentError, match=re.escape(named)):
        preview_occurrences("* * * * *", "UTC", after_ms, count)


def _walk_to_the_end(expression: str, zone: str, after: int) -> tuple[list[int], str]:
    """Return every occurrence after `after` and the message of the error that ended the walk."""
    found: list[int] = []
    while True:
        try:
            after = next_occurrence_ms(expression, zone, after)
        except InvalidCronError as exc:
            return found, str(exc)
        found.append(after)


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Etc/GMT+12", "America/New_York"])
@pytest.mark.parametrize("expression", ["*/30 * * * *", "0 0 * * *", "0 0 1 1 *", "59 59 23 * * *"])
def test_occurrences_at_the_end_of_the_range_stop_cleanly(expression: str, zone: str) -> None:
    """Walking towards EPOCH_MS_MAX ends in InvalidCronError, never in a datetime overflow."""
    found, end = _walk_to_the_end(expression, zone, EPOCH_MS_MAX - 3 * 86_400_000)
    assert "no occurrence before 9999-12-30" in end
    assert all(value <= EPOCH_MS_MAX for value in found)
    with pytest.raises(InvalidCronError, match="no occurrence before 9999-12-30"):
        preview_occurrences(expression, zone, EPOCH_MS_MAX, 1)


def test_preview_of_zero_is_empty() -> None:
    """A preview of zero occurrences is an empty list."""
    assert preview_occurrences("* * * * *", "UTC", 0, 0) == []


@pytest.mark.parametrize(
    "expression",
    [
        "61 * * * *",
        "* * * *",
        "* * * * * * *",
        "garbage",
        "",
        "*/0 * * * *",
        "0 0 30 2 *",
        "@reboot",
    ],
)
def test_bad_expressions_are_rejected_with_the_expression_named(expression: str) -> None:
    """Invalid or never-firing expressions raise InvalidCronError quoting the expression."""
    with pytest.raises(InvalidCronError) as caught:
        validate_cron_expression(expression)
    assert repr(expression) in str(caught.value)
    assert isinstance(caught.value, QL3Error)
    assert isinstance(caught.value, ValueError)


def test_bad_expression_rejected_by_next_occurrence() -> None:
    """The occurrence functions validate too."""
    with pytest.raises(InvalidCronError, match="61"):
        next_occurrence_ms("61 * * * *", "UTC", 0)


def test_expression_is_normalized() -> None:
    """Extra whitespace is collapsed to single spaces."""
    assert validate_cron_expression("  */5   *  * * * ") == "*/5 * * * *"


def test_unknown_timezone_rejected_by_preview() -> None:
    """preview_occurrences refuses an unknown zone."""
    with pytest.raises(UnknownTimezoneError):
        preview_occurrences("* * * * *", "Nowhere/Town", 0, 1)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("*/5 * * * *", True),
        ("0 * * * *", True),
        ("* * * * * *", True),
        ("0 */2 1 * * *", True),
        ("30 1 * * *", False),
        ("0,30 2,3 * * *", False),
        ("0 30 1 * * *", False),
        ("5,*/10 1 * * *", False),
    ],
)
def test_interval_like_classification(expression: str, *, expected: bool) -> None:
    """Interval-like means the seconds, minutes or hours field starts with `*`."""
    assert is_interval_like(expression) is expected


@pytest.mark.parametrize(
    ("expression", "days"),
    [
        ("0 0 2-31 * 0-6", [1, 2, 3, 4, 5]),  # OR with a full weekday range: every day
        ("0 0 1,15 * 1-7", [1, 2, 3, 4, 5]),
        ("0 0 */2 * 0-6", [1, 3, 5, 7, 9]),  # `*`-led day-of-month: AND
        ("0 0 1 * 1", [1, 5, 12, 19, 26]),  # both restricted: OR
        ("0 0 * * 1", [5, 12, 19, 26, 2]),  # `*` day-of-month: weekday only
    ],
)
def test_day_fields_follow_vixie_cron(expression: str, days: list[int]) -> None:
    """Day-of-month and day-of-week are OR-ed unless one starts with `*` (Vixie): January 2026."""
    start = ms("UTC", 2026, 1, 1, 0, 0)
    found = preview_occurrences(expression, "UTC", start - 1, 5)
    assert [datetime.fromtimestamp(t / 1000, wheel_zone("UTC")).day for t in found] == days


def test_the_zone_rules_of_the_next_occurrence_are_passed_by_name_only() -> None:
    """`rules` is keyword-only: a fourth positional argument cannot be mistaken for it."""
    with pytest.raises(TypeError, match="positional argument"):
        next_occurrence_ms("0 * * * *", "UTC", 0, None)  # type: ignore[call-arg]
    assert next_occurrence_ms(expression="0 * * * *", timezone="UTC", after_ms=0) == 3_600_000
