"""Pause keys with no database: `--until`, `--replay`, `--pause-after-failures` and the file keys.

Every mistake is one line naming the flag or key and the value, exit 2, before any connection;
`parse_until` turns text into an instant or a duration without reading any clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ql3_cluster_control._config import ConfigurationError
from ql3_cluster_control._pause_keys import entry_pause, parse_until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_NOWHERE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("90s", (None, 90_000)),
        ("15m", (None, 900_000)),
        ("2h", (None, 7_200_000)),
        ("1d", (None, 86_400_000)),
        ("2027-01-01T09:00:00+01:00", (1_798_761_600_000 + 8 * 3_600_000, None)),
        ("2027-01-01T00:00:00Z", (1_798_761_600_000, None)),
    ],
)
def test_until_is_an_instant_or_a_duration(text: str, parsed: tuple[int | None, ...]) -> None:
    """Durations become milliseconds for the database to add; instants epoch milliseconds."""
    assert parse_until(text) == parsed


@pytest.mark.parametrize("text", ["soon", "0s", "2w", "-5m", "2027-01-01T09:00:00", "3651d"])
def test_a_bad_until_names_the_flag_and_the_value(text: str) -> None:
    """No offset, no unit, zero, negative or over ten years: refused, naming --until."""
    with pytest.raises(ConfigurationError) as caught:
        parse_until(text)
    assert str(caught.value).startswith(f"--until: {text!r}")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["schedule", "pause", "job", "--until", "tomorrow"], "--until: 'tomorrow'"),
        (["schedule", "resume", "job", "--replay", "everything"], "replay"),
        (["schedule", "add", "job", "--cron", "* * * * *", "--pause-after-failures", "0"],
         "--pause-after-failures"),
    ],
)  # fmt: skip
def test_pause_flags_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """A bad until, replay or threshold is refused before any connection (port 1: none)."""
    line = usage_error([*args, "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("pause_after_failures = 0", "'w': pause_after_failures=0 must be an integer from 1"),
        ('pause_after_failures = "3"', "'w': pause_after_failures='3'"),
        ('paused = "yes"', "'w': paused must be true or a table"),
        ('paused = { why = "x" }', "'w': paused: unknown key 'why'"),
        ('paused = { until = "2h" }', "'w': paused.until='2h' must be an ISO 8601 instant"),
    ],
)
def test_apply_file_pause_errors_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path, entry: str, needle: str
) -> None:
    """A schedule file's pause mistake names the schedule, the key and the value."""
    path = tmp_path / "s.toml"
    path.write_text(f'[[schedule]]\nname = "w"\ncron = "* * * * *"\n{entry}\n')
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert needle in line, line


def test_a_file_declares_a_pause_with_a_reason_and_an_instant() -> None:
    """`paused = true` and `{reason, until}` become the spec's declared pause."""
    declared = entry_pause(
        {
            "paused": {"reason": "freeze", "until": "2027-01-01T00:00:00Z"},
            "pause_after_failures": 3,
        },
        "schedule 'w'",
    )
    assert declared["pause_after_failures"] == 3
    paused = declared["paused"]
    assert (paused.reason, paused.until_ms) == ("freeze", 1_798_761_600_000)
    bare = entry_pause({"paused": True}, "schedule 'w'")
    assert (bare["paused"].reason, bare["paused"].until_ms) == (None, None)
    assert entry_pause({}, "schedule 'w'") == {"pause_after_failures": None, "paused": None}
