"""The cron dialect of runtime-core's README, case by case: what it accepts means exactly that.

Includes every case the third-party parser QL3 used to rely on got wrong: croniter 7 widened
single-value ranges (`0 9-9 * * *` fired hourly), read `?` as a wildcard in both day fields, and
accepted `R` (a random minute per process).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cron_cases import five_field, six_field, wheel_zone
from hypothesis import given
from hypothesis import strategies as st
from ql3_runtime_core import (
    InvalidCronError,
    is_interval_like,
    preview_occurrences,
    validate_cron_expression,
)

# 2026-01-01T00:00:00Z, a Thursday.
START_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp()) * 1000


def walls(expression: str, count: int, zone: str = "UTC") -> list[str]:
    """Return the next `count` occurrences after START_MS as local 'Www DD HH:MM:SS' strings."""
    found = preview_occurrences(expression, zone, START_MS - 1, count)
    return [
        datetime.fromtimestamp(t / 1000, wheel_zone(zone)).strftime("%a %d %H:%M:%S") for t in found
    ]


def test_single_value_hour_range_fires_once_a_day() -> None:
    """`0 9-9 * * *` fires at 09:00 once a day, not every hour."""
    assert walls("0 9-9 * * *", 3) == ["Thu 01 09:00:00", "Fri 02 09:00:00", "Sat 03 09:00:00"]


def test_single_value_minute_range_fires_hourly() -> None:
    """`5-5 * * * *` fires at minute 5 of every hour, not every minute."""
    assert walls("5-5 * * * *", 3) == ["Thu 01 00:05:00", "Thu 01 01:05:00", "Thu 01 02:05:00"]


def test_single_value_weekday_range_fires_on_mondays_only() -> None:
    """`0 9 * * 1-1` fires on Mondays only."""
    assert walls("0 9 * * 1-1", 3) == ["Mon 05 09:00:00", "Mon 12 09:00:00", "Mon 19 09:00:00"]


def test_single_value_day_range_fires_on_the_tenth_only() -> None:
    """`0 0 10-10 * *` fires on the 10th of each month only."""
    found = preview_occurrences("0 0 10-10 * *", "UTC", START_MS - 1, 3)
    days = [datetime.fromtimestamp(t / 1000, UTC).strftime("%m-%d") for t in found]
    assert days == ["01-10", "02-10", "03-10"]


def test_question_mark_with_weekdays_fires_monday_to_friday_only() -> None:
    """`0 0 12 ? * MON-FRI` (seconds first) fires at noon on weekdays, never at weekends."""
    assert walls("0 0 12 ? * MON-FRI", 5) == [
        "Thu 01 12:00:00",
        "Fri 02 12:00:00",
        "Mon 05 12:00:00",
        "Tue 06 12:00:00",
        "Wed 07 12:00:00",
    ]


def test_question_mark_day_of_month_with_sunday_fires_on_sundays_only() -> None:
    """`0 9 ? * SUN` fires on Sundays only."""
    assert walls("0 9 ? * SUN", 3) == ["Sun 04 09:00:00", "Sun 11 09:00:00", "Sun 18 09:00:00"]


def test_question_mark_day_of_week_with_the_fifteenth_fires_on_the_fifteenth_only() -> None:
    """`0 9 15 * ?` fires on the 15th only."""
    found = preview_occurrences("0 9 15 * ?", "UTC", START_MS - 1, 3)
    days = [datetime.fromtimestamp(t / 1000, UTC).strftime("%m-%d %H:%M") for t in found]
    assert days == ["01-15 09:00", "02-15 09:00", "03-15 09:00"]


@pytest.mark.parametrize("spelling", ["0", "7", "SUN", "sun", "Sun", "7-7", "0,7"])
def test_sunday_is_zero_seven_or_its_name(spelling: str) -> None:
    """Day-of-week 0 and 7 are Sunday; day names are case-insensitive."""
    assert walls(f"0 0 * * {spelling}", 2) == ["Sun 04 00:00:00", "Sun 11 00:00:00"]


def test_names_work_inside_ranges_and_with_steps() -> None:
    """`jan-MAR` and `Mon-Fri/2` mean months 1-3 and Monday, Wednesday, Friday."""
    assert walls("0 0 * jan-MAR Mon-Fri/2", 4) == [
        "Fri 02 00:00:00",
        "Mon 05 00:00:00",
        "Wed 07 00:00:00",
        "Fri 09 00:00:00",
    ]


def test_value_with_step_runs_to_the_end_of_the_field() -> None:
    """`a/n` is `a-max/n`: `1/2` in day-of-week is Monday, Wednesday, Friday and Sunday (7)."""
    assert walls("0 0 * * 1/2", 4) == [
        "Fri 02 00:00:00",
        "Sun 04 00:00:00",
        "Mon 05 00:00:00",
        "Wed 07 00:00:00",
    ]
    assert walls("50/5 10 * * *", 3) == ["Thu 01 10:50:00", "Thu 01 10:55:00", "Fri 02 10:50:00"]


@pytest.mark.parametrize(
    ("expression", "dates"),
    [
        ("0 0 13 * FRI", ["02-06", "02-13", "02-20"]),  # both restricted: OR
        ("0 0 */13 * FRI", ["02-27", "03-27", "05-01"]),  # day field starts with `*`: AND
        ("0 0 ? * FRI", ["02-06", "02-13", "02-20"]),  # `?` is `*`: Fridays only
        ("0 0 1-31 * FRI", ["02-01", "02-02", "02-03"]),  # a spelled-out range is no star: OR
    ],
)
def test_day_fields_follow_vixie_or_and_star_rule(expression: str, dates: list[str]) -> None:
    """Both day fields restricted: either matches; a `*`-led (or `?`) day field: both must match."""
    start = int(datetime(2026, 2, 1, tzinfo=UTC).timestamp()) * 1000
    found = preview_occurrences(expression, "UTC", start - 1, 3)
    assert [datetime.fromtimestamp(t / 1000, UTC).strftime("%m-%d") for t in found] == dates


@pytest.mark.parametrize(
    ("nickname", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        (" @Daily ", "0 0 * * *"),
    ],
)
def test_nicknames_normalize_to_their_five_fields(nickname: str, fields: str) -> None:
    """A nickname is stored as its 5-field equivalent and fires exactly like it."""
    assert validate_cron_expression(nickname) == fields
    assert preview_occurrences(nickname, "UTC", START_MS, 3) == preview_occurrences(
        fields, "UTC", START_MS, 3
    )


def test_nickname_classification_follows_its_fields() -> None:
    """`@hourly` (`0 * * * *`) follows absolute time; `@daily` is fixed-time."""
    assert is_interval_like("@hourly") is True
    assert is_interval_like("@daily") is False


def test_february_29_fires_in_leap_years_only() -> None:
    """`0 0 29 2 *` is accepted and fires on 29 February 2028."""
    found = preview_occurrences("0 0 29 2 *", "UTC", START_MS, 1)
    assert datetime.fromtimestamp(found[0] / 1000, UTC).date().isoformat() == "2028-02-29"


@pytest.mark.parametrize(
    ("expression", "field", "token"),
    [
        ("R 9 * * *", "minute", "'R'"),
        ("0 R * * *", "hour", "'R'"),
        ("H 9 * * *", "minute", "'H'"),
        ("H/15 * * * *", "minute", "'H'"),
        ("0 9 L * *", "day-of-month", "'L'"),
        ("0 9 LW * *", "day-of-month", "'LW'"),
        ("0 9 15W * *", "day-of-month", "'W'"),
        ("0 9 * * 5L", "day-of-week", "'L'"),
        ("0 9 * * FRI#2", "day-of-week", "'#'"),
        ("0 9 * * 5#2", "day-of-week", "'#'"),
        ("*/0 * * * *", "minute", "'0'"),
        ("0 0-23/0 * * *", "hour", "'0'"),
        ("0 23-1 * * *", "hour", "'23-1'"),
        ("0 0 * * FRI-MON", "day-of-week", "'FRI-MON'"),
        ("61 * * * *", "minute", "'61'"),
        ("0 24 * * *", "hour", "'24'"),
        ("0 0 0 * *", "day-of-month", "'0'"),
        ("0 0 32 * *", "day-of-month", "'32'"),
        ("0 0 * 13 *", "month", "'13'"),
        ("0 0 * * 8", "day-of-week", "'8'"),
        ("60 0 0 * * *", "second", "'60'"),
        ("*/60 * * * *", "minute", "'60'"),
        ("0 ? * * *", "hour", "'?'"),
        ("0 0 ?,1 * *", "day-of-month", "'?'"),
        ("0 0 * ? *", "month", "'?'"),
        ("0 0 1,,2 * *", "day-of-month", "'1,,2'"),
        ("0 0 1, * *", "day-of-month", "'1,'"),
        ("0 0 * * MONDAY", "day-of-week", "'MONDAY'"),
        ("0 0 * * JAN", "day-of-week", "'JAN'"),
        ("0 0 * MON *", "month", "'MON'"),
        ("0 0 * * 1-", "day-of-week", "'1-'"),
        ("-1 * * * *", "minute", "'-1'"),
        ("1/2/3 * * * *", "minute", "'2/3'"),
        ("*/ * * * *", "minute", "'*/'"),
        ("0 0 * * \u0661", "day-of-week", "'\u0661'"),  # an Arabic-Indic digit one
    ],
)
def test_refusals_name_the_field_and_the_token(expression: str, field: str, token: str) -> None:
    """Anything outside the dialect is an InvalidCronError naming the field and the token."""
    with pytest.raises(InvalidCronError) as caught:
        validate_cron_expression(expression)
    message = str(caught.value)
    assert repr(expression) in message
    assert f"{field} field" in message
    assert token in message.removeprefix(f"cron: invalid expression {expression!r}")


FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
# Items refused in every field, with the token the message must quote.
REFUSED_ITEMS = [
    ("R", "'R'"),
    ("H", "'H'"),
    ("H/5", "'H'"),
    ("L", "'L'"),
    ("3L", "'L'"),
    ("LW", "'LW'"),
    ("9W", "'W'"),
    ("1#2", "'#'"),
    ("*/0", "'0'"),
    ("7-3", "'7-3'"),
    ("99", "'99'"),
    ("x", "'x'"),
    ("1-", "'1-'"),
    ("%", "'%'"),
]


@given(
    expression=st.one_of(five_field, six_field).filter(lambda text: not text.startswith("@")),
    position=st.integers(0, 5),
    refused=st.sampled_from(REFUSED_ITEMS),
    in_list=st.booleans(),
)
def test_a_refused_item_anywhere_is_named_with_its_field(
    expression: str, position: int, refused: tuple[str, str], *, in_list: bool
) -> None:
    """A refused item put in any field of any valid expression is named with that field."""
    fields = expression.split()
    position %= len(fields)
    item, token = refused
    fields[position] = f"{fields[position].replace('?', '*')},{item}" if in_list else item
    names = FIELD_NAMES if len(fields) == 6 else FIELD_NAMES[1:]
    with pytest.raises(InvalidCronError) as caught:
        validate_cron_expression(" ".join(fields))
    reason = caught.value.reason
    assert reason.startswith(f"{names[position]} field ")
    assert token in reason


@pytest.mark.parametrize("expression", ["@reboot", "@every 5m", "@daily 5"])
def test_unknown_nicknames_are_refused_by_name(expression: str) -> None:
    """`@reboot` and other unknown nicknames are refused, naming the nickname."""
    with pytest.raises(InvalidCronError, match="nickname") as caught:
        validate_cron_expression(expression)
    assert repr(" ".join(expression.split())) in str(caught.value).split(": ", 2)[2]


@pytest.mark.parametrize(
    "expression",
    ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 FEB ?", "0 0 31 2 */2", "0 0 0 30 2 *"],
)
def test_expressions_that_never_fire_are_refused(expression: str) -> None:
    """A day rule that no date satisfies is refused, naming why."""
    with pytest.raises(InvalidCronError, match="never fires"):
        validate_cron_expression(expression)


def test_or_rule_makes_an_impossible_day_of_month_harmless() -> None:
    """`0 0 31 2 MON` (both restricted: OR) fires on Mondays of February."""
    found = preview_occurrences("0 0 31 2 MON", "UTC", START_MS, 2)
    days = [datetime.fromtimestamp(t / 1000, UTC).strftime("%a %m-%d") for t in found]
    assert days == ["Mon 02-02", "Mon 02-09"]


@pytest.mark.parametrize(
    ("month", "last_day"),
    [(1, 31), (2, 29), (3, 31), (4, 30), (5, 31), (6, 30),
     (7, 31), (8, 31), (9, 30), (10, 31), (11, 30), (12, 31)],
)  # fmt: skip
def test_the_last_day_of_every_month_is_an_expression_that_fires(month: int, last_day: int) -> None:
    """Each month's longest day of the month is accepted (29 February included) and fires on it."""
    expression = f"0 0 {last_day} {month} *"
    (first,) = _fires(expression, 1)
    fired = datetime.fromtimestamp(first / 1000, UTC)
    assert (fired.month, fired.day) == (month, last_day)


@pytest.mark.parametrize("step", ["5", "05", "0005"])
def test_a_step_of_up_to_four_digits_reads_as_its_number(step: str) -> None:
    """`*/0005` is `*/5`: leading zeros are read, as Vixie cron reads them, up to four digits."""
    assert _fires(f"*/{step} * * * *", 3) == _fires("*/5 * * * *", 3)


def _fires(expression: str, count: int) -> list[int]:
    """Return the first occurrences of an expression the dialect must accept (a refusal fails)."""
    try:
        return list(preview_occurrences(expression, "UTC", START_MS, count))
    except InvalidCronError as exc:
        pytest.fail(f"{expression!r} is refused: {exc}")


def test_a_step_of_five_digits_is_refused_naming_it() -> None:
    """Five digits are refused as text (never parsed into a number), naming the step."""
    with pytest.raises(InvalidCronError, match="step '00005' is not a number from 1 to 59"):
        validate_cron_expression("*/00005 * * * *")


@pytest.mark.parametrize(
    ("expression", "count", "field", "expected"),
    [
        # Day of week 0-7 (7 is Sunday again): */2 is 0, 2, 4, 6 = Sunday, Tuesday, Thursday,
        # Saturday, and never Monday (which a step counted from -1 or 1 would give).
        ("0 0 * * */2", 14, "%a", {"Sun", "Tue", "Thu", "Sat"}),
        # Day of month 1-31: */10 is the 1st, 11th, 21st and 31st (not the 10th, 20th, 30th).
        ("0 0 */10 * *", 12, "%d", {"01", "11", "21", "31"}),
        # Month 1-12: */5 is January, June, November.
        ("0 0 1 */5 *", 6, "%b", {"Jan", "Jun", "Nov"}),
    ],
)
def test_a_star_step_counts_from_the_fields_lowest_value(
    expression: str, count: int, field: str, expected: set[str]
) -> None:
    """`*/n` takes every n-th value from the field's own lowest one (Vixie cron's reading)."""
    fired = {
        datetime.fromtimestamp(t / 1000, UTC).strftime(field) for t in _fires(expression, count)
    }
    assert fired == expected


def test_the_time_fields_read_as_their_values_before_any_search() -> None:
    """`*` and `*/n` in seconds, minutes and hours are exactly the field's values from 0.

    Read from the parsed fields, before any occurrence is searched for: a field that reached
    outside its range (an hour -1, say) must fail here, not make a search run forever.
    """
    from ql3_runtime_core._cron_fields import parse_expression  # noqa: PLC0415

    stars = parse_expression("* * * * * *", "* * * * * *")
    assert (stars.seconds, stars.minutes, stars.hours) == (
        tuple(range(60)), tuple(range(60)), tuple(range(24)),
    )  # fmt: skip
    steps = parse_expression("*/15 */20 */6 * * *", "*/15 */20 */6 * * *")
    assert (steps.seconds, steps.minutes, steps.hours) == (
        (0, 15, 30, 45),
        (0, 20, 40),
        (0, 6, 12, 18),
    )


def test_thirty_days_of_the_month_are_not_every_day() -> None:
    """`1-30` in the day-of-month field never fires on a 31st (it is not the whole field)."""
    fired = [datetime.fromtimestamp(t / 1000, UTC) for t in _fires("0 0 1-30 * *", 62)]
    assert all(moment.day != 31 for moment in fired)
    assert len({moment.month for moment in fired}) == 3  # Jan, Feb, Mar reached
