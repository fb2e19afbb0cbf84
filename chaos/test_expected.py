"""The chaos harness's independent expectations: cronsim's answers, and no QL3 cron code used.

These run without a database. They pin the subset the scenarios rely on (6 fields with seconds
first, steps, lists, 5-field expressions, "strictly after") to instants worked out by hand, and
check that no chaos module imports QL3's cron functions, which would make every verdict agree
with a cron bug.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from expected import ExpectationError, first_after, occurrences_between

# 2026-11-29 12:00:00 UTC, a Sunday, in epoch milliseconds.
NOON_MS = 1_795_953_600_000
SECOND_MS = 1_000
# QL3's cron surface (runtime-core's public cron functions and anything cron-named).
PRODUCT_CRON_NAMES = frozenset(
    {
        "next_occurrence_ms",
        "latest_occurrence_ms",
        "count_occurrences_ms",
        "preview_occurrences",
        "validate_cron_expression",
        "is_interval_like",
        "initial_cursor",
    }
)


def test_every_second_names_each_whole_second() -> None:
    """`* * * * * *` names every whole second strictly after the start, fractions dropped."""
    start = NOON_MS + 250
    assert occurrences_between("* * * * * *", "UTC", start, start + 3_000) == [
        NOON_MS + SECOND_MS,
        NOON_MS + 2 * SECOND_MS,
        NOON_MS + 3 * SECOND_MS,
    ]
    assert first_after("* * * * * *", "UTC", NOON_MS) == NOON_MS + SECOND_MS


def test_seconds_step_and_list_follow_the_minute() -> None:
    """`*/10` and `15,45` in the seconds field name those seconds of every minute."""
    assert occurrences_between("*/10 * * * * *", "UTC", NOON_MS + 3_000, NOON_MS + 30_000) == [
        NOON_MS + 10_000,
        NOON_MS + 20_000,
        NOON_MS + 30_000,
    ]
    assert occurrences_between("15,45 * * * * *", "UTC", NOON_MS, NOON_MS + 120_000) == [
        NOON_MS + 15_000,
        NOON_MS + 45_000,
        NOON_MS + 75_000,
        NOON_MS + 105_000,
    ]


def test_five_fields_fire_at_second_zero() -> None:
    """A 5-field expression fires at second 0 of its minutes; day-of-week names count."""
    assert occurrences_between("*/30 * * * *", "UTC", NOON_MS, NOON_MS + 3_600_000) == [
        NOON_MS + 1_800_000,
        NOON_MS + 3_600_000,
    ]
    # Sunday noon -> the next Monday 09:00 is 21 h later.
    assert first_after("0 9 * * MON", "UTC", NOON_MS) == NOON_MS + 21 * 3_600_000


def test_fixed_offset_zone_shifts_wall_time() -> None:
    """In a zone without daylight saving the wall time is UTC shifted by its offset."""
    # 12:00 UTC is 21:00 in Tokyo (UTC+9); the next 22:00 there is one hour later.
    assert first_after("0 0 22 * * *", "Asia/Tokyo", NOON_MS) == NOON_MS + 3_600_000


def test_daylight_saving_change_is_refused() -> None:
    """A span crossing a UTC-offset change is refused rather than guessed."""
    # 2026-03-29 01:00 UTC: Europe/Berlin springs forward from +1 to +2.
    change_ms = 1_774_746_000_000
    with pytest.raises(ExpectationError, match="offset changes"):
        occurrences_between("0 30 * * * *", "Europe/Berlin", change_ms - 7_200_000, change_ms)


def test_unreadable_expression_is_refused() -> None:
    """An expression cronsim cannot read is refused, naming it."""
    with pytest.raises(ExpectationError, match="every tuesday"):
        first_after("every tuesday", "UTC", NOON_MS)


def test_no_chaos_module_uses_product_cron_code() -> None:
    """No chaos module imports a QL3 cron function: expectations stay independent."""
    offenders = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ql3_"):
                names = {alias.name for alias in node.names}
                offenders += [f"{path.name}: {name}" for name in names & PRODUCT_CRON_NAMES]
    assert not offenders, offenders
