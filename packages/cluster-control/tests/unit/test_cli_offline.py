"""The `ql3` command line where no database is needed: preview, DST, exit codes, rule zero."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control import cli_app as app
from typer.testing import CliRunner


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """Return a runner with no QL3_* variables in the environment."""
    for key in list(os.environ):
        if key.startswith("QL3_"):
            monkeypatch.delenv(key)
    return CliRunner()


def _preview(cli: CliRunner, *args: str) -> list[int]:
    result = cli.invoke(app, ["schedule", "preview", "--json", *args])
    assert result.exit_code == 0, result.output
    values = json.loads(result.stdout)
    assert all(isinstance(value, int) for value in values)
    return list(values)


def test_preview_spring_forward_gap_fires_once_after_the_gap(cli: CliRunner) -> None:
    """02:30 on the New York spring-forward day fires once, at 03:00 EDT (07:00 UTC)."""
    values = _preview(
        cli, "--cron", "30 2 * * *", "--tz", "America/New_York", "--after", "2026-03-07T12:00:00",
        "--count", "2",
    )  # fmt: skip
    assert values == [1772953200000, 1773037800000]


def test_preview_fall_back_fold_fires_once(cli: CliRunner) -> None:
    """01:30 on the New York fall-back day fires once, at its first instance (EDT)."""
    values = _preview(
        cli, "--cron", "30 1 * * *", "--tz", "America/New_York",
        "--after-ms", "1793448000000", "--count", "2",
    )  # fmt: skip
    assert values == [1793511000000, 1793601000000]


def test_preview_interval_follows_absolute_time_through_the_fold(cli: CliRunner) -> None:
    """`*/30` keeps a 30-minute absolute cadence through the repeated hour."""
    values = _preview(
        cli, "--cron", "*/30 * * * *", "--tz", "America/New_York",
        "--after", "2026-11-01T00:50:00-04:00", "--count", "4",
    )  # fmt: skip
    assert [b - a for a, b in itertools.pairwise(values)] == [1_800_000] * 3


def test_preview_text_shows_iso_in_the_zone(cli: CliRunner) -> None:
    """Text output shows each occurrence in the schedule's zone and as epoch ms."""
    result = cli.invoke(
        app, ["schedule", "preview", "--cron", "0 9 * * 1", "--tz", "Europe/Paris",
              "--after-ms", "0", "--count", "1"],
    )  # fmt: skip
    assert result.exit_code == 0
    assert result.stdout.strip() == "1970-01-05T09:00:00.000+01:00  374400000"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--cron", "61 * * * *", "--after-ms", "0"], "61 * * * *"),
        (["--cron", "R 9 * * *", "--after-ms", "0"], "minute field 'R': 'R' is refused"),
        (["--cron", "0 9 * * 5#2", "--after-ms", "0"], "day-of-week field '5#2': '#'"),
        (["--cron", "0 23-1 * * *", "--after-ms", "0"], "hour field '23-1'"),
        (["--cron", "@reboot", "--after-ms", "0"], "'@reboot'"),
        (["--cron", "0 9 * * *", "--tz", "localtime", "--after-ms", "0"], "'localtime'"),
        (["--cron", "* * * * *", "--tz", "Mars/Olympus", "--after-ms", "0"], "Mars/Olympus"),
        (["--cron", "* * * * *", "--after", "yesterday"], "yesterday"),
        (["--cron", "* * * * *"], "never reads the node clock"),
        (["--cron", "* * * * *", "--after", "2026-01-01T00:00:00", "--after-ms", "0"], "exclusive"),
    ],
)
def test_preview_errors_are_one_line_with_exit_2(
    cli: CliRunner, args: list[str], needle: str
) -> None:
    """Bad cron, unknown zone, bad or missing start: exit 2, one line naming the bad value."""
    result = cli.invoke(app, ["schedule", "preview", *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ql3: error: ")
    assert needle in lines[0]


def test_preview_single_value_range_fires_once_a_day(cli: CliRunner) -> None:
    """`0 9-9 * * *` previews 09:00 once a day (croniter 7 widened it to every hour)."""
    values = _preview(cli, "--cron", "0 9-9 * * *", "--after-ms", "0", "--count", "3")
    assert values == [9 * 3_600_000 + day * 86_400_000 for day in range(3)]


def test_run_refuses_clock_flag_and_env(cli: CliRunner) -> None:
    """`ql3 run --clock` and QL3_CLOCK both exit 2 naming rule zero, before any connection."""
    flag = cli.invoke(app, ["run", "--dsn", "host=203.0.113.1", "--clock", "node"])
    assert flag.exit_code == 2
    assert "rule zero" in flag.stderr
    env = cli.invoke(app, ["run", "--dsn", "host=203.0.113.1"], env={"QL3_CLOCK": "node"})
    assert env.exit_code == 2
    assert "QL3_CLOCK" in env.stderr
    assert "rule zero" in env.stderr


def test_unknown_ql3_variable_is_refused_for_every_command(cli: CliRunner) -> None:
    """A stray QL3_* variable stops any command with exit 2, naming it."""
    result = cli.invoke(app, ["status"], env={"QL3_LEASE": "5"})
    assert result.exit_code == 2
    assert "QL3_LEASE: unknown QL3 setting" in result.stderr


def test_run_without_dsn_and_with_bad_settings_exits_2(cli: CliRunner) -> None:
    """No DSN, a lease out of bounds, or a bad log format are configuration errors (exit 2)."""
    assert cli.invoke(app, ["run"]).exit_code == 2
    lease = cli.invoke(app, ["run", "--dsn", "host=203.0.113.1", "--lease-ms", "100"])
    assert lease.exit_code == 2
    assert "lease_ms=100" in lease.stderr
    assert cli.invoke(app, ["run", "--log-format", "xml"]).exit_code == 2


def test_commands_needing_a_database_say_so(cli: CliRunner) -> None:
    """Without --dsn or QL3_DSN, database commands exit 2 and say how to give one."""
    for args in (["status"], ["verify"], ["migrate"], ["schedule", "list"], ["roles", "provision"]):
        result = cli.invoke(app, args)
        assert result.exit_code == 2, args
        assert "--dsn or set QL3_DSN" in result.stderr


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("s.toml", '[[schedule]]\nname = "a"\ncron = "* * * * *"\ncolour = "red"\n', "colour"),
        ("s.toml", '[[schedule]]\nname = "a"\ncron = "nope"\n', "nope"),
        ("s.toml", '[[schedule]]\nname = "a"\ncron = "* * * * *"\ntz = "X/Y"\n', "X/Y"),
        ("s.toml", '[[schedule]]\nname = "a"\ncron = "* * * * *"\nmisfire = "never"\n', "never"),
        (
            "s.json",
            '[{"name": "a", "cron": "* * * * *"}, {"name": "a", "cron": "* * * * *"}]',
            "twice",
        ),
        ("s.json", '{"name": "a"}', "list of objects"),
        ("s.toml", "[[schedule]\n", "invalid TOML"),
    ],
)
def test_apply_file_errors_exit_2_before_connecting(
    cli: CliRunner, tmp_path: Path, name: str, content: str, needle: str
) -> None:
    """Schedule-file mistakes are named (key, value, duplicate), exit 2, before connecting."""
    path = tmp_path / name
    path.write_text(content)
    result = cli.invoke(app, ["schedule", "apply", str(path), "--dsn", "host=203.0.113.1"])
    assert result.exit_code == 2
    assert needle in result.stderr


def test_unknown_verb_is_a_usage_error(cli: CliRunner) -> None:
    """An unknown command exits 2 (usage)."""
    assert cli.invoke(app, ["schedules"]).exit_code == 2
