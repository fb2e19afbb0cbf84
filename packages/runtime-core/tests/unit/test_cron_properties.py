"""Property tests: the cron engine against a brute-force walker, across DST changes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from cron_cases import ZONES, five_field, six_field, transitions, wheel_zone
from cron_reference import ReferenceCron
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ql3_runtime_core import (
    InvalidCronError,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
    occurrences_after_ms,
    preview_occurrences,
    validate_cron_expression,
)

_PROPERTY = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def engine_occurrences(expression: str, zone: str, start_s: int, end_s: int) -> list[int]:
    """Return the engine's occurrences in `[start_s, end_s]` as epoch seconds."""
    found: list[int] = []
    current = next_occurrence_ms(expression, zone, start_s * 1000 - 1)
    while current <= end_s * 1000:
        found.append(current // 1000)
        current = next_occurrence_ms(expression, zone, current)
    return found


def stream_occurrences(expression: str, zone: str, start_s: int, end_s: int) -> list[int]:
    """Return `occurrences_after_ms`'s occurrences in `[start_s, end_s]` as epoch seconds."""
    found: list[int] = []
    for at_ms in occurrences_after_ms(expression, zone, start_s * 1000 - 1):
        if at_ms > end_s * 1000:
            break
        found.append(at_ms // 1000)
    return found


def fires_within_years(reference: ReferenceCron) -> bool:
    """Tell whether any date in 2000-2040 matches (a reference for 'the expression can fire').

    Forty years hold every weekday of every date, Feb 29 included (the pattern repeats every 28
    years between 1901 and 2099).
    """
    day = date(2000, 1, 1)
    while day.year <= 2040:
        if reference.day_matches(day):
            return True
        day += timedelta(days=1)
    return False


def valid_or_never_fires(expression: str) -> bool:
    """Validate, asserting that a rejection only happens for an expression that cannot fire."""
    try:
        validate_cron_expression(expression)
    except InvalidCronError:
        assert not fires_within_years(ReferenceCron(expression)), expression
        return False
    return True


def check_window(expression: str, zone_name: str, start_s: int, end_s: int) -> None:
    """Compare engine and reference in one window."""
    if not valid_or_never_fires(expression):
        return
    expected = ReferenceCron(expression).occurrences(wheel_zone(zone_name), start_s, end_s)
    assert engine_occurrences(expression, zone_name, start_s, end_s) == expected, (
        expression,
        zone_name,
    )
    assert stream_occurrences(expression, zone_name, start_s, end_s) == expected, (
        expression,
        zone_name,
    )


@_PROPERTY
@given(
    expression=five_field,
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    shift=st.integers(-7_200, 7_200),
)
def test_five_field_matches_minute_walker(
    expression: str, zone_name: str, pick: int, shift: int
) -> None:
    """A 5-field engine equals a per-minute walk of absolute time over 2 days around a change."""
    anchors = transitions(zone_name)
    anchor = anchors[pick % len(anchors)] + shift
    check_window(expression, zone_name, anchor - 26 * 3600, anchor + 26 * 3600)


@_PROPERTY
@given(
    expression=six_field,
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    shift=st.integers(-3_600, 3_600),
)
def test_six_field_matches_second_walker(
    expression: str, zone_name: str, pick: int, shift: int
) -> None:
    """A 6-field engine equals a per-second walk of absolute time over 100 minutes near a change."""
    anchors = transitions(zone_name)
    anchor = anchors[pick % len(anchors)] + shift
    check_window(expression, zone_name, anchor - 50 * 60, anchor + 50 * 60)


@settings(max_examples=60, deadline=None)
@given(
    expression=st.one_of(five_field, six_field),
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    after=st.integers(-40 * 3600, 40 * 3600),
    millis=st.integers(0, 999),
)
def test_latest_is_the_inverse_of_next(
    expression: str, zone_name: str, pick: int, after: int, millis: int
) -> None:
    """The latest occurrence at or before t is an occurrence whose successor lies after t."""
    if not valid_or_never_fires(expression):
        return
    anchors = transitions(zone_name)
    at_ms = (anchors[pick % len(anchors)] + after) * 1000 + millis
    floor_ms = at_ms - 3 * 86_400_000
    latest = latest_occurrence_ms(expression, zone_name, at_ms, floor_ms)
    first = next_occurrence_ms(expression, zone_name, floor_ms - 1)
    if latest is None:
        assert first > at_ms
        return
    assert floor_ms <= latest <= at_ms
    assert next_occurrence_ms(expression, zone_name, latest - 1) == latest
    assert next_occurrence_ms(expression, zone_name, latest) > at_ms


@settings(max_examples=60, deadline=None)
@given(
    expression=st.one_of(five_field, six_field),
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    after=st.integers(-7_200_000, 7_200_000),
    count=st.integers(0, 12),
)
def test_preview_is_strictly_increasing_and_strictly_after(
    expression: str, zone_name: str, pick: int, after: int, count: int
) -> None:
    """preview_occurrences gives `count` whole-second instants, increasing, after the start."""
    if not valid_or_never_fires(expression):
        return
    anchors = transitions(zone_name)
    after_ms = anchors[pick % len(anchors)] * 1000 + after
    preview = preview_occurrences(expression, zone_name, after_ms, count)
    assert len(preview) == count
    assert all(instant % 1000 == 0 for instant in preview)
    assert all(b > a for a, b in zip([after_ms, *preview], preview, strict=False))


@pytest.mark.parametrize("zone_name", ZONES)
def test_every_zone_has_anchors(zone_name: str) -> None:
    """Each zone of the property tests offers windows (DST zones: real transitions)."""
    expected = zone_name not in {"Asia/Kolkata", "UTC"}
    assert bool(transitions(zone_name)) is True
    has_change = any(
        datetime.fromtimestamp(t - 1, wheel_zone(zone_name)).utcoffset()
        != datetime.fromtimestamp(t, wheel_zone(zone_name)).utcoffset()
        for t in transitions(zone_name)
    )
    assert has_change is expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression=st.one_of(five_field, six_field),
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(0, 10_000),
    before_ms=st.integers(0, 40 * 3_600_000),
    after_ms=st.integers(-3_600_000, 40 * 3_600_000),
)
def test_count_equals_enumeration(
    expression: str, zone_name: str, pick: int, before_ms: int, after_ms: int
) -> None:
    """count_occurrences_ms equals the number of occurrences enumerated one by one."""
    if not valid_or_never_fires(expression):
        return
    anchor_ms = transitions(zone_name)[pick % len(transitions(zone_name))] * 1000
    if len(expression.split()) == 6:  # keep per-second enumeration short
        before_ms, after_ms = before_ms // 40, after_ms // 40
    first_ms, last_ms = anchor_ms - before_ms, anchor_ms + after_ms
    expected = 0
    current = next_occurrence_ms(expression, zone_name, first_ms - 1)
    while current <= last_ms:
        expected += 1
        current = next_occurrence_ms(expression, zone_name, current)
    assert count_occurrences_ms(expression, zone_name, first_ms, last_ms) == expected


@pytest.mark.parametrize(
    ("expression", "zone_name", "expected"),
    [
        ("* * * * * *", "UTC", 7 * 86_400 + 1),
        ("* * * * * *", "America/New_York", 7 * 86_400 + 1),
        ("*/5 * * * *", "America/New_York", 7 * 288 + 1),
        ("30 2 * * *", "America/New_York", 7),
        ("30 1 * * *", "America/New_York", 7),
    ],
)
def test_count_over_a_week_across_a_change(expression: str, zone_name: str, expected: int) -> None:
    """A week of an every-second schedule across a DST change counts every absolute second."""
    start = int(datetime(2026, 3, 5, 0, 0, tzinfo=UTC).timestamp()) * 1000
    end = start + 7 * 86_400_000
    assert count_occurrences_ms(expression, zone_name, start, end) == expected


@pytest.mark.parametrize(
    ("expression", "zone_name"),
    [
        ("* * * * * *", "America/New_York"),
        ("*/7 * * * * *", "Europe/Paris"),
        ("30 1 * * *", "America/New_York"),
        ("0 2,3 * * *", "Europe/London"),
        ("15 */2 * * * *", "Australia/Lord_Howe"),
    ],
)
def test_stream_across_changes_equals_repeated_next(expression: str, zone_name: str) -> None:
    """occurrences_after_ms equals chained next_occurrence_ms from 8 h before each of 4 changes.

    Two days for the daily expressions, so each stream also crosses several days.
    """
    span_ms = (2 * 86_400 if len(expression.split()) == 5 else 16 * 3_600) * 1000
    for change in transitions(zone_name)[:4]:
        start = change * 1000 - span_ms // 2 + 123
        stream = occurrences_after_ms(expression, zone_name, start)
        current = start
        while current < start + span_ms:
            current = next_occurrence_ms(expression, zone_name, current)
            assert next(stream) == current, (expression, zone_name, current)
