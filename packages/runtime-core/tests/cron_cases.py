"""Shared material of the cron property tests: zones, DST anchors and expression generators.

The generators cover the whole dialect of runtime-core's README: numbers and names (any case, also
inside ranges), single-value ranges (`9-9`), ranges, steps (`*/n`, `a-b/n`, `a/n`), lists, `?` in
a day field, 0 and 7 for Sunday, both day fields restricted, nicknames, 5 and 6 fields. Every
generated expression is valid by the table, or never fires (which the engine must refuse).

Zones are read from the tzdata wheel's files directly, not through the engine's `load_timezone`,
so that a test's expectation never depends on the code under test, nor on the test machine's
`/usr/share/zoneinfo` (which may hold other rules than the pinned wheel).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

__all__ = [
    "DAY_NAMES",
    "MONTH_NAMES",
    "NICKNAMES",
    "ZONES",
    "date_fields",
    "five_field",
    "six_field",
    "transitions",
    "wheel_zone",
]

ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "UTC",
)
NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_YEAR_2025 = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp())
_YEAR_2028 = int(datetime(2028, 1, 1, tzinfo=UTC).timestamp())


@cache
def wheel_zone(name: str) -> ZoneInfo:
    """Return a zone read from the tzdata wheel's own file (the rules the engine must use)."""
    with resources.files("tzdata").joinpath("zoneinfo", *name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


@cache
def transitions(zone_name: str) -> tuple[int, ...]:
    """Return the offset changes of a zone in 2025-2027 (epoch seconds), or fixed anchors."""
    zone = wheel_zone(zone_name)

    def offset(instant: int) -> timedelta | None:
        return datetime.fromtimestamp(instant, zone).utcoffset()

    found: list[int] = []
    for hour in range(_YEAR_2025, _YEAR_2028, 3600):
        if offset(hour) != offset(hour + 3600):
            low, high = hour, hour + 3600
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset(middle) == offset(hour) else (low, middle)
            found.append(high)
    # Zones without DST still get anchors (local midnight and noon on a few days).
    return tuple(found) or tuple(range(_YEAR_2025 + 11 * 86_400, _YEAR_2028, 97 * 86_400 + 21_600))


def field(
    low: int,
    high: int,
    hot: list[int],
    *,
    star_weight: int = 1,
    names: tuple[list[str], int] | None = None,
) -> st.SearchStrategy[str]:
    """Build one cron field from values, ranges (also `a-a`), steps and lists, biased to `hot`."""
    value = st.one_of(st.sampled_from(hot), st.integers(low, high))

    def spell(number: int) -> st.SearchStrategy[str]:
        if names is None or not 0 <= number - names[1] < len(names[0]):
            return st.just(str(number))
        name = names[0][number - names[1]]
        return st.sampled_from([str(number), name, name.lower(), name.title()])

    text = value.flatmap(spell)
    pair = st.tuples(value, value).map(sorted)
    pair_text = pair.flatmap(lambda ab: st.tuples(spell(ab[0]), spell(ab[1])).map("-".join))
    step = st.integers(1, min(9, high - low))
    single = st.one_of(
        text,
        pair_text,
        st.tuples(pair_text, step).map(lambda p: f"{p[0]}/{p[1]}"),
        st.integers(2, max(2, (high - low) // 2)).map(lambda n: f"*/{n}"),
        st.tuples(text, step).map(lambda p: f"{p[0]}/{p[1]}"),
    )
    lists = st.lists(single, min_size=2, max_size=3).map(",".join)
    return st.one_of(*([st.just("*")] * star_weight), single, lists)


def date_fields() -> st.SearchStrategy[list[str]]:
    """Day-of-month, month and day-of-week fields, often all `*` so DST days are reached.

    `?` stands in either day field; both day fields are restricted in a good share of cases.
    """
    day_of_month = st.one_of(
        st.just("?"), field(1, 31, [1, 2, 5, 6, 8, 9, 15, 28, 29, 31], star_weight=2)
    )
    day_of_week = st.one_of(
        st.just("?"), field(0, 7, [0, 1, 5, 6, 7], star_weight=2, names=(DAY_NAMES, 0))
    )
    restricted = st.tuples(
        day_of_month,
        field(1, 12, [2, 3, 4, 9, 10, 11], star_weight=4, names=(MONTH_NAMES, 1)),
        day_of_week,
    ).map(list)
    return st.one_of(st.just(["*", "*", "*"]), st.just(["*", "*", "*"]), restricted)


_five_fields = st.tuples(
    field(0, 59, [0, 5, 15, 30, 45, 59]),
    field(0, 23, [0, 1, 2, 3, 5, 6, 9, 11, 12, 17, 18, 23]),
    date_fields(),
).map(lambda f: " ".join([f[0], f[1], *f[2]]))
# Nicknames in about one case of eight.
five_field = st.one_of(*[_five_fields] * 7, st.sampled_from(sorted(NICKNAMES)))

six_field = st.tuples(
    field(0, 59, [0, 30, 59]),
    field(0, 59, [0, 1, 15, 30, 59]),
    field(0, 23, [0, 1, 2, 3, 5, 6, 11, 12, 17, 18, 23], star_weight=3),
    date_fields(),
).map(lambda f: " ".join([f[0], f[1], f[2], *f[3]]))
