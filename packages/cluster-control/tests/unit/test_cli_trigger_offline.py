"""`ql3 schedule trigger`, `[[trigger]]` and `[[backfill]]` tables, checked with no database."""

from __future__ import annotations

import json
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control import cli_app as app
from ql3_cluster_control._backfill_file import load_backfill_requests
from ql3_cluster_control._schedule_file import load_schedule_file
from ql3_cluster_control._trigger_file import TriggerRequest, load_trigger_requests
from ql3_cluster_postgres import BACKFILL_BATCH_DEFAULT
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


@pytest.mark.parametrize(
    ("tables", "needle"),
    [
        ('[[backfill]]\nschedule = "job"\nfrom = "2026-01-01T00:00:00Z"\n', "'request_id'"),
        (
            '[[backfill]]\nschedule = "job"\nrequest_id = "b"\nfrom = "2026-01-01T00:00:00Z"\n',
            "'to' is required",
        ),
        (
            (
                '[[backfill]]\nschedule = "job"\nrequest_id = "b"\n'
                'from = "2026-01-02T00:00:00Z"\nto = "2026-01-01T00:00:00"\n'
            ),
            "no UTC offset",
        ),
        (
            (
                '[[backfill]]\nschedule = "job"\nrequest_id = "b"\n'
                'from = "2026-01-02T00:00:00Z"\nto = "2026-01-01T00:00:00Z"\n'
            ),
            "is after to",
        ),
        (
            (
                '[[backfill]]\nschedule = "job"\nrequest_id = "b"\nfrom = 2026-01-01T00:00:00Z\n'
                'to = 2026-01-02T00:00:00Z\ninclude_before_creation = "yes"\n'
            ),
            "include_before_creation='yes'",
        ),
        ('[[backfill]]\nschedule = "job"\nrequest_id = "b"\nspan = 1\n', "unknown key 'span'"),
    ],
)
def test_bad_backfill_tables_exit_2_before_connecting(
    cli: CliRunner, tmp_path: Path, tables: str, needle: str
) -> None:
    """A schedule file's bad `[[backfill]]` is one line naming it, exit 2; no database reached."""
    path = tmp_path / "schedules.toml"
    path.write_text(tables)
    dsn = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"
    result = cli.invoke(app, ["schedule", "apply", str(path), "--dsn", dsn])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert needle in line


def test_a_file_backfill_reads_toml_datetimes_and_iso_text(tmp_path: Path) -> None:
    """`from`/`to` as TOML datetimes or as ISO 8601 text give the same instants (epoch ms)."""
    path = tmp_path / "schedules.toml"
    path.write_text(
        '[[backfill]]\nschedule = "job"\nrequest_id = "b"\nfrom = 2026-01-01T00:00:00Z\n'
        'to = "2026-01-01T01:00:00+01:00"\n'
    )
    (request,) = load_backfill_requests(path)
    assert (request.from_ms, request.to_ms) == (1_767_225_600_000, 1_767_225_600_000)
    assert (request.include_before_creation, request.batch) == (False, BACKFILL_BATCH_DEFAULT)
