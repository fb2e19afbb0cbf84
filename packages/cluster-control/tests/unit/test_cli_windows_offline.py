"""Windows and one-off runs on the command line, where no database is needed: refusals, DST.

Every bad `--start-at`, `--end-at` or `--at` (and schedule file key) exits 2 naming the flag or key
and the value before any connection is tried; a one-off's instant is the cron engine's own.
"""

from __future__ import annotations

from collections.abc import Callable  # noqa: TC003  # pytest resolves fixture annotations
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest

# A DSN no server answers: a command that tried to connect would fail differently.
_NOWHERE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--cron", "* * * * *", "--start-at", "2027-01-01T09:00:00"],
         "--start-at: '2027-01-01T09:00:00' has no UTC offset"),
        (["--cron", "* * * * *", "--end-at", "soon"],
         "--end-at: 'soon' is not an ISO 8601 date-time"),
        (["--cron", "* * * * *", "--start-at", "2027-01-02T00:00:00Z", "--end-at",
          "2027-01-01T21:00:00-02:00"],
         "--end-at: '2027-01-01T21:00:00-02:00' is earlier than --start-at"),
        (["--cron", "* * * * *", "--start-at", "1969-12-31T23:59:59Z"],
         "--start-at: '1969-12-31T23:59:59Z' is outside 1970-01-01T00:00:00+00:00.."),
        (["--at", "2027-01-01T09:00:00", "--cron", "* * * * *"], "--at excludes --cron"),
        (["--at", "2027-01-01T09:00:00", "--end-at", "2028-01-01T00:00:00Z"],
         "--at excludes --end-at"),
        (["--at", "2027-01-01T09:00:00+01:00"], "--at: '2027-01-01T09:00:00+01:00' carries a UTC"),
        (["--at", "2027-01-01T09:00:00.250"], "has a fraction of a second"),
        (["--at", "9999-12-31T12:00:00"], "--at: '9999-12-31T12:00:00' in UTC is outside"),
        ([], "give --cron (a repeating schedule) or --at (a one-off run)"),
    ],
)  # fmt: skip
def test_schedule_add_window_and_one_off_errors_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """A bad window or one-off is refused naming the flag and the value, before connecting."""
    line = usage_error(["schedule", "add", "x", *args, "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ('cron = "* * * * *"\nstart_at = "2027-01-01T09:00:00"', "'w': start_at: '2027-01-01T09"),
        ('cron = "* * * * *"\nstart_at = 2027-01-02T00:00:00Z\nend_at = 2027-01-01T00:00:00Z',
         "'w': end_at: '2027-01-01T00:00:00+00:00' is earlier than start_at"),
        ('at = "2027-01-01T09:00:00"\ncron = "0 9 1 1 *"', "'w': 'at' excludes 'cron'"),
        ('at = "2027-01-01T09:00:00"\nstart_at = "2027-01-01T00:00:00Z"',
         "'w': 'at' excludes 'start_at'"),
        ("at = 2027-01-01", "'w': at: '2027-01-01' is a date without a time"),
        ('at = "2027-01-01T09:00:00Z"', "'w': at: '2027-01-01T09:00:00Z' carries a UTC offset"),
        ("start_at = 2027-01-01T00:00:00Z", "'cron' is required"),
    ],
)  # fmt: skip
def test_apply_file_window_and_one_off_errors_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path, entry: str, needle: str
) -> None:
    """A schedule file's window or `at` mistake names the schedule, the key and the value."""
    path = tmp_path / "s.toml"
    path.write_text(f'[[schedule]]\nname = "w"\n{entry}\n')
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("wall", "instance"),
    [
        # Spring forward in Berlin: 02:00-03:00 local does not exist; the engine fires at 03:00.
        ("2027-03-28T02:30:00", "2027-03-28T03:00:00+02:00"),
        # Fall back: 02:00-03:00 local happens twice; the engine fires the first (summer time).
        ("2027-10-31T02:30:00", "2027-10-31T02:30:00+02:00"),
        ("2027-01-01T09:00:00", "2027-01-01T09:00:00+01:00"),
    ],
)
def test_a_one_off_is_the_instant_the_cron_engine_gives_its_wall_time(
    wall: str, instance: str
) -> None:
    """`at` becomes a yearly cron of that wall time, windowed to the one instant preview shows.

    The instant is asked of nothing but the engine: it must equal the first occurrence that
    `preview` (the same engine) lists for that cron near the date, so DST gaps and folds follow
    the cron rules, and the window start = end admits exactly that one.
    """
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    from ql3_cluster_control._schedule_file import one_off_definition  # noqa: PLC0415
    from ql3_runtime_core import preview_occurrences  # noqa: PLC0415

    definition = one_off_definition(wall, "Europe/Berlin", "skip", 0)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    expected = (datetime.fromisoformat(instance) - epoch) // timedelta(milliseconds=1)
    assert definition.start_at_ms == definition.end_at_ms == expected
    day_before = expected - 86_400_000
    (first,) = preview_occurrences(definition.cron, "Europe/Berlin", day_before, 1)
    assert first == expected
    assert (definition.misfire_policy, definition.misfire_grace_ms) == ("skip", 0)
