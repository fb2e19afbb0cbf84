"""`ql3 schedule trigger` and `[[trigger]]` tables with no database: refused before connecting."""

from __future__ import annotations

import json
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control import cli_app as app
from ql3_cluster_control._schedule_file import load_schedule_file
from ql3_cluster_control._trigger_file import TriggerRequest, load_trigger_requests
from typer.testing import CliRunner  # noqa: TC002  # pytest resolves fixture annotations


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--payload", "{not json"], "--payload"),
        (["--payload", "[1, 2]"], "must be a JSON object"),
        (["--request-id", "has space"], "request_id"),
        (["--request-id", "-leading-dash"], "request_id"),
    ],
)
def test_trigger_argument_errors_exit_2_before_connecting(
    cli: CliRunner, args: list[str], needle: str
) -> None:
    """A bad payload or request id is one line naming it, exit 2; no database is reached."""
    # Port 1 on loopback: nothing listens, so connecting would fail with exit 1, not 2.
    dsn = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"
    result = cli.invoke(app, ["schedule", "trigger", "job", *args, "--dsn", dsn])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ql3: error: ")
    assert needle in lines[0]


@pytest.mark.parametrize(
    ("tables", "needle"),
    [
        ('[[trigger]]\nschedule = "job"\n', "'request_id' is required"),
        ('[[trigger]]\nschedule = "job"\nrequest_id = "has space"\n', "request_id"),
        ('[[trigger]]\nschedule = "job"\nrequest_id = "a"\nwhen = 1\n', "unknown key 'when'"),
        ('[[trigger]]\nschedule = "job"\nrequest_id = "a"\npayload = 3\n', "payload=3"),
        ('[[trigger]]\nrequest_id = "a"\n', "'schedule' is required"),
        (
            (
                '[[trigger]]\nschedule = "a"\nrequest_id = "x"\n'
                '[[trigger]]\nschedule = "b"\nrequest_id = "x"\n'
            ),
            "'x' appears twice",
        ),
        ('[[triggers]]\nschedule = "job"\n', "unknown top-level key 'triggers'"),
    ],
)
def test_bad_trigger_tables_exit_2_before_connecting(
    cli: CliRunner, tmp_path: Path, tables: str, needle: str
) -> None:
    """A schedule file's bad `[[trigger]]` is one line naming it, exit 2; no database reached."""
    path = tmp_path / "schedules.toml"
    path.write_text('[[schedule]]\nname = "job"\ncron = "0 3 * * *"\n' + tables)
    dsn = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"
    result = cli.invoke(app, ["schedule", "apply", str(path), "--dsn", dsn])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ql3: error: ")
    assert needle in line


def test_a_json_file_holds_schedules_and_triggers(tmp_path: Path) -> None:
    """JSON: the list of schedules as before, or an object with `schedule` and `trigger` lists."""
    path = tmp_path / "schedules.json"
    schedule = {"name": "job", "cron": "0 3 * * *"}
    request = {"schedule": "job", "request_id": "r-1", "payload": {"k": 1}}
    path.write_text(json.dumps({"schedule": [schedule], "trigger": [request]}))
    assert [spec.name for spec in load_schedule_file(path)] == ["job"]
    assert load_trigger_requests(path) == [TriggerRequest("job", "r-1", {"k": 1})]
    path.write_text(json.dumps([schedule]))
    assert load_trigger_requests(path) == []
