"""Differential tests: the cron engine against cronsim, an independent engine, over the dialect.

cronsim (test-only) parses and walks expressions with its own code; nothing of the engine is called
to build its expectation. Where cronsim's semantics differ from the dialect of runtime-core's README
the oracle is translated or restricted on purpose, and only there:

- `?` (a whole day field, meaning exactly `*`, star flag included) is unknown to cronsim: it gets
  `*`. Nicknames are unknown to cronsim: it gets their 5-field forms from a table written here.
- cronsim widens a stepped range that holds a single value (`0-0/1`, `5-7/5`) to the end of the
  field, as if it were `5/5`; cronie and the dialect keep the single value, so cronsim gets it.
- DST: cronsim applies Debian's rules (fold at the first instance, gap at the transition) only to
  5-field expressions whose minute and hour fields do not start with `*`, i.e. exactly our
  fixed-time class; those are compared across DST changes in every zone. Everything else cronsim
  walks in absolute time, as we walk interval-like expressions; they are compared across changes in
  New York and London, but not in Lord Howe (cronsim loses the minute alignment after a
  30-minute shift: `* 0 * * *` resumes at 00:30) nor in Santiago (its gap starts at midnight and
  cronsim fires the nonexistent 00:00 at 01:00): there the window ends before the change.
- 6-field fixed-time expressions (`15 30 1 * * *`) are fixed-time for us but absolute-time for
  cronsim (it skips Debian's rules for 6 fields): their window ends before the change in DST zones.
  The brute-force walker of test_cron_properties covers every window the oracle cannot.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from cron_cases import (
    DAY_NAMES,
    MONTH_NAMES,
    NICKNAMES,
    ZONES,
    five_field,
    six_field,
    transitions,
    wheel_zone,
)
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ql3_runtime_core import InvalidCronError, next_occurrence_ms, validate_cron_expression

# Zones whose changes cronsim's absolute-time walk gets wrong (see the module docstring).
_ABSOLUTE_TIME_UNSAFE = {"Australia/Lord_Howe", "America/Santiago"}
_NO_DST = {"UTC", "Asia/Kolkata"}
_DIFFERENTIAL = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _number(text: str) -> int:
    """Read a value written as a number, a month name or a day name (the lists do not overlap)."""
    upper = text.upper()
    if upper in MONTH_NAMES:
        return MONTH_NAMES.index(upper) + 1
    return DAY_NAMES.index(upper) if upper in DAY_NAMES else int(text)


def _oracle_item(item: str) -> str:
    """Write a stepped range that holds one value (`5-7/5`) as that value (`5`) for cronsim."""
    body, slash, step = item.partition("/")
    first, dash, last = body.partition("-")
    if slash and dash and _number(last) - _number(first) < int(step):
        return first
    return item


def oracle_text(expression: str) -> str:
    """Translate the expression for cronsim: nicknames spelled out, `?` written `*`."""
    text = NICKNAMES.get(expression.lower(), expression)
    parts = ["*" if part == "?" else part for part in text.split()]
    return " ".join(",".join(_oracle_item(item) for item in part.split(",")) for part in parts)


def refusal(expression: str) -> str | None:
    """Return why the engine refuses the expression, or None when it accepts it."""
    try:
        validate_cron_expression(expression)
    except InvalidCronError as refused:
        return str(refused)
    return None


def debian_fixed_time(text: str) -> bool:
    """Tell whether cronsim applies Debian's DST rules (5 fields, minute and hour not `*`-led)."""
    parts = text.split()
    return len(parts) == 5 and not parts[0].startswith("*") and not parts[1].startswith("*")


def crosses_changes_safely(text: str, zone_name: str) -> bool:
    """Tell whether cronsim's reading of DST changes in this zone is the dialect's, for `text`."""
    if zone_name in _NO_DST or debian_fixed_time(text):
        return True
    absolute_for_us = any(part.startswith("*") for part in text.split()[: len(text.split()) - 3])
    return absolute_for_us and zone_name not in _ABSOLUTE_TIME_UNSAFE


def oracle(text: str, zone_name: str, start_s: int, end_s: int) -> list[int] | None:
    """Return cronsim's occurrences in `[start_s, end_s]`, or None when it finds none ever."""
    zone = wheel_zone(zone_name)
    found: list[int] = []
    try:
        for occurrence in CronSim(text, datetime.fromtimestamp(start_s - 1, zone)):
            instant = int(occurrence.timestamp())
            if instant > end_s:
                return found
            found.append(instant)
    except CronSimError:
        return None
    return found or None  # the iterator ended: nothing within 50 years


def engine(expression: str, zone_name: str, start_s: int, end_s: int) -> list[int]:
    """Return the engine's occurrences in `[start_s, end_s]` (epoch seconds)."""
    found: list[int] = []
    current = next_occurrence_ms(expression, zone_name, start_s * 1000 - 1)
    while current <= end_s * 1000:
        found.append(current // 1000)
        current = next_occurrence_ms(expression, zone_name, current)
    return found


def compare(expression: str, zone_name: str, pick: int, span_s: int) -> None:
    """Compare engine and cronsim over `span_s` seconds around (or just before) a DST change."""
    text = oracle_text(expression)
    anchors = transitions(zone_name)
    anchor = anchors[pick % len(anchors)]
    if crosses_changes_safely(text, zone_name):
        start_s = anchor - span_s // 2
    else:
        start_s = anchor - span_s - 3600
    end_s = start_s + span_s
    reason = refusal(expression)
    if reason is not None:
        assert "never fires" in reason, reason
        assert oracle(text, zone_name, start_s, end_s) is None, expression
        return
    expected = oracle(text, zone_name, start_s, end_s)
    assert expected is not None, expression  # cronsim fires it within 50 years
    assert engine(expression, zone_name, start_s, end_s) == expected, (expression, text)


@_DIFFERENTIAL
@given(expression=five_field, zone_name=st.sampled_from(ZONES), pick=st.integers(0, 10_000))
def test_five_field_expressions_agree_with_cronsim(
    expression: str, zone_name: str, pick: int
) -> None:
    """5-field expressions and nicknames yield exactly cronsim's occurrences over 52 hours."""
    compare(expression, zone_name, pick, 52 * 3600)


@_DIFFERENTIAL
@given(expression=six_field, zone_name=st.sampled_from(ZONES), pick=st.integers(0, 10_000))
def test_six_field_expressions_agree_with_cronsim(
    expression: str, zone_name: str, pick: int
) -> None:
    """6-field expressions (seconds first) yield exactly cronsim's occurrences over 100 minutes."""
    compare(expression, zone_name, pick, 100 * 60)


@pytest.mark.parametrize(
    ("expression", "zone_name"),
    [
        ("0 9-9 * * *", "UTC"),
        ("5-5 * * * *", "UTC"),
        ("0 9 * * 1-1", "America/New_York"),
        ("0 0 10-10 * *", "Europe/London"),
        ("0 0 12 ? * MON-FRI", "UTC"),
        ("0 9 ? * SUN", "America/Santiago"),
        ("0 9 15 * ?", "Asia/Kolkata"),
        ("30 2 * * sun", "America/New_York"),
        ("0 0 1-7 * 1", "Europe/London"),
        ("0 0 */2 * MON", "UTC"),
    ],
)
def test_named_cases_agree_with_cronsim_over_a_month(expression: str, zone_name: str) -> None:
    """The cases croniter 7 got wrong (and Vixie's day rule) match cronsim over 40 days."""
    compare(expression, zone_name, 0, 40 * 86_400)
