"""The `ql3` command line where no database is needed: preview, DST, exit codes, rule zero."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable  # noqa: TC003  # pytest resolves fixture annotations
from importlib import metadata
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control import cli_app as app
from ql3_cluster_postgres import VERIFY_RULES
from ql3_runtime_core import zone_rules_version
from typer.testing import CliRunner


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


def test_offline_preview_names_the_nodes_zone_rules(cli: CliRunner) -> None:
    """Without a database, preview says (on stderr) that this node's tzdata computed it."""
    result = cli.invoke(
        app, ["schedule", "preview", "--cron", "0 9 * * *", "--after-ms", "0", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert f"this node's zone rules, tzdata {zone_rules_version()}" in result.stderr
    assert json.loads(result.stdout)[0] == 32_400_000


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


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_each_wheel_and_the_zone_rules(cli: CliRunner, flag: str) -> None:
    """`ql3 --version` prints the three wheels' and tzdata's installed versions and exits 0."""
    result = cli.invoke(app, [flag])
    assert result.exit_code == 0, result.output
    expected = [
        f"{name} {metadata.version(name)}"
        for name in ("ql3-cluster-control", "ql3-cluster-postgres", "ql3-runtime-core")
    ]
    expected.append(f"tzdata {metadata.version('tzdata')} (zone rules)")
    assert result.stdout.splitlines() == expected


# No server listens on port 1: a value that reached the database would fail with exit 1.
_NOWHERE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--grace-ms", "99999999999999999999"], ["--grace-ms", "604800000"]),
        (["--grace-ms", "604800001"], ["--grace-ms", "604800000"]),
        (["--grace-ms", "-1"], ["--grace-ms", "0"]),
    ],
)
def test_schedule_add_numbers_out_of_bounds_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needles: list[str]
) -> None:
    """A grace past 7 days (or negative) is a usage error naming the flag and its bound."""
    add = ["schedule", "add", "x", "--cron", "* * * * *"]
    line = usage_error([*add, *args, "--dsn", _NOWHERE])
    assert all(needle in line for needle in needles), line


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("   ", "name: must not begin or end with whitespace, got '   '"),
        ("a\tb\x07", "name: must be printable, got 'a\\tb\\x07'"),
        (" x", "name: must not begin or end with whitespace"),
        ("x" * 201, "name: String should have at most 200 characters"),
    ],
)
def test_schedule_add_bad_names_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], name: str, needle: str
) -> None:
    """A blank, padded, non-printable or too long name is a usage error naming `name`."""
    line = usage_error(["schedule", "add", name, "--cron", "* * * * *", "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--after-ms", "99999999999999999999"], "after_ms: must be within 0..253402127999999"),
        (["--after-ms", "-1"], "after_ms: must be within 0..253402127999999"),
        (["--after-ms", "0", "--count", "10001"], "--count"),
        (["--after", "9999-12-29T00:00:00", "--cron", "0 0 1 1 *"], "no occurrence before"),
    ],
)
def test_preview_numbers_out_of_bounds_exit_2(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """A preview start outside the epoch range or past the last occurrence is a usage error."""
    line = usage_error(["schedule", "preview", "--cron", "* * * * *", *args])
    assert needle in line, line


@pytest.mark.parametrize(
    ("since", "needle"),
    [("99999999999999999999", "since_ms: must be within"), ("-5", "since_ms: must be within")],
)
def test_verify_since_out_of_bounds_exits_2_before_connecting(
    usage_error: Callable[[list[str]], str], since: str, needle: str
) -> None:
    """`verify --since-ms` outside the epoch range is refused by name without connecting."""
    assert needle in usage_error(["verify", "--since-ms", since, "--dsn", _NOWHERE])


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [
        ("--lease-ms", "99999999999999999999", "lease_ms"),
        ("--claim-batch", "99999999999999999999", "claim_batch"),
        ("--cycle-budget", "0", "cycle_budget"),
        ("--poll-interval-ms", "99999999999999999999", "poll_interval_ms"),
        ("--metrics-port", "70000", "metrics_port"),
    ],
)
def test_run_settings_out_of_bounds_exit_2_naming_the_setting(
    usage_error: Callable[[list[str]], str], flag: str, value: str, field: str
) -> None:
    """Every numeric `ql3 run` flag is bounded by the settings model: exit 2 naming it."""
    line = usage_error(["run", "--dsn", _NOWHERE, flag, value])
    assert f"{field}={value}" in line, line


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ('name = "a\\tb"\ncron = "* * * * *"', "schedule 'a\\tb': name: must be printable"),
        ('name = "   "\ncron = "* * * * *"', "schedule '   ': name: must not begin or end"),
        (
            'name = "ok"\ncron = "* * * * *"\ngrace_ms = 99999999999999999999',
            "schedule 'ok': grace_ms: must be within 0..604800000",
        ),
    ],
)
def test_apply_file_bad_names_and_numbers_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path, entry: str, needle: str
) -> None:
    """A schedule file's bad name or grace is named with its schedule and key, exit 2."""
    path = tmp_path / "s.toml"
    path.write_text(f"[[schedule]]\n{entry}\n")
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--max-attempts", "0"], "'--max-attempts': Input should be greater than or equal to 1"),
        (["--max-attempts", "101"], "'--max-attempts': Input should be less than or equal to 100"),
        (["--timeout-s", "0"], "'--timeout-s': Input should be greater than or equal to 1"),
        (["--timeout-s", "99999999999999999999"], "'--timeout-s': Input should be less than"),
        (["--retry-backoff-ms", "-1"], "'--retry-backoff-ms': Input should be greater than or"),
        (["--command", ""], "command: must not be empty or blank, got ''"),
        (["--command", "   "], "command: must not be empty or blank"),
        (["--command", "x" * 8193], "command: at most 8192 characters, got 8193"),
    ],
)
def test_schedule_add_execution_out_of_bounds_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """What a schedule runs is bounded before the database: exit 2 naming the flag or field."""
    line = usage_error(["schedule", "add", "x", "--cron", "* * * * *", *args, "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("timeout_s = 0", "schedule 'ok': timeout_s: must be within 1..86400, got 0"),
        ("timeout_s = 1.5", "schedule 'ok': timeout_s: 1.5 is not an integer"),
        ("max_attempts = 101", "schedule 'ok': max_attempts: must be within 1..100, got 101"),
        ("max_attempts = true", "schedule 'ok': max_attempts: True is not an integer"),
        ("retry_backoff_ms = -5", "schedule 'ok': retry_backoff_ms: must be within 0..86400000"),
        ('command = "  "', "schedule 'ok': command: must not be empty or blank"),
        ("command = 3", "schedule 'ok': command: 3 is not a string"),
    ],
)
def test_apply_file_execution_keys_are_checked_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path, entry: str, needle: str
) -> None:
    """A schedule file's command and attempt keys are named with their schedule, exit 2."""
    path = tmp_path / "s.toml"
    path.write_text(f'[[schedule]]\nname = "ok"\ncron = "* * * * *"\n{entry}\n')
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "0"], "concurrency=0"),
        (["--lease-ms", "999"], "lease_ms=999"),
        (["--grace-ms", "99999999999999999999"], "grace_ms=99999999999999999999"),
        (["--poll-interval-ms", "5"], "poll_interval_ms=5"),
        (["--worker-id", " padded"], "id=' padded'"),
        (["--clock", "node"], "rule zero"),
    ],
)
def test_worker_settings_out_of_bounds_exit_2(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """Every `ql3 worker` setting is bounded by its model: exit 2 naming it, before connecting."""
    line = usage_error(["worker", "--dsn", _NOWHERE, *args])
    assert needle in line, line


def test_worker_needs_a_database(usage_error: Callable[[list[str]], str]) -> None:
    """Without a DSN the worker exits 2 and says which variables give one."""
    assert "QL3_WORKER_DSN or QL3_DSN" in usage_error(["worker"])


def test_a_command_may_run_ql3_with_its_task_variables(cli: CliRunner) -> None:
    """The variables a worker gives its command are not refused as unknown QL3 settings."""
    env = {
        "QL3_RUN_ID": "1",
        "QL3_ATTEMPT": "1",
        "QL3_SCHEDULED_FOR_MS": "0",
        "QL3_SCHEDULE": "s",
        "QL3_TASK_PAYLOAD": "{}",
        "QL3_WORKER_CONCURRENCY": "2",
    }
    result = cli.invoke(
        app, ["schedule", "preview", "--cron", "* * * * *", "--after-ms", "0"], env=env
    )
    assert result.exit_code == 0, result.stderr


def test_verify_help_names_every_rule_on_one_line() -> None:
    """`ql3 verify --help` lists each rule verify checks, one line each, and the time options."""
    result = CliRunner().invoke(app, ["verify", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for rule in VERIFY_RULES:
        assert sum(1 for line in lines if line.strip().startswith(f"{rule} ")) == 1, rule
    assert "--as-of" in result.output
    assert "--lease-ms" in result.output
