"""The overlap policy from the command line and schedule files, against real PostgreSQL.

The CLI runs in-process (`cli`); what `schedule add` and `schedule apply` wrote is read back
through `schedule list --json`, `ql3 status --json` and the tables people read.
"""

from __future__ import annotations

import json
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations
from typing import TYPE_CHECKING, Any

from fix_db import sql_rows
from ql3_cluster_control import cli_app as app

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database
    from typer.testing import CliRunner


def _ok(cli: CliRunner, *args: str) -> str:
    result = cli.invoke(app, list(args), env={"COLUMNS": "400"})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def _executions(cli: CliRunner, dsn: str) -> dict[str, dict[str, Any]]:
    listed = json.loads(_ok(cli, "schedule", "list", "--json", "--dsn", dsn))
    return {s["name"]: s["execution"] for s in listed}


def test_add_apply_list_and_status_carry_the_policy(
    ql3_db: Ql3Database, cli: CliRunner, tmp_path: Path
) -> None:
    """Flags and file keys reach the task; list and status show them; a change is an update."""
    dsn = ql3_db.dsn("admin")
    added = _ok(cli, "schedule", "add", "solo", "--cron", "0 3 * * *", "--command", "true",
                "--overlap", "skip", "--dsn", dsn)  # fmt: skip
    assert "overlap skip (max running 1)" in added
    _ok(cli, "schedule", "add", "plain", "--cron", "0 4 * * *", "--dsn", dsn)
    path = tmp_path / "s.toml"
    path.write_text(
        '[[schedule]]\nname = "solo"\ncron = "0 3 * * *"\ncommand = "true"\n'
        'overlap = "replace"\nmax_running = 2\n'
        '[[schedule]]\nname = "plain"\ncron = "0 4 * * *"\n'
    )
    applied = _ok(cli, "schedule", "apply", str(path), "--dsn", dsn)
    assert "updated 1, unchanged 1" in applied
    executions = _executions(cli, dsn)
    assert (executions["solo"]["overlap"], executions["solo"]["max_running"]) == ("replace", 2)
    assert (executions["plain"]["overlap"], executions["plain"]["max_running"]) == ("allow", None)
    stored = sql_rows(
        ql3_db.superuser_dsn, "SELECT name, overlap, max_running FROM ql3.tasks ORDER BY name"
    )
    assert stored == [("plain", "allow", None), ("solo", "replace", 2)]
    # The schedule rows were not rewritten for a change of execution only.
    versions = sql_rows(ql3_db.superuser_dsn, "SELECT version FROM ql3.trigger_schedules")
    assert versions == [(0,), (0,)]
    table = _ok(cli, "schedule", "list", "--dsn", dsn)
    assert "overlap replace (max running 2)" in table
    status = json.loads(_ok(cli, "status", "--json", "--dsn", dsn))
    policies = {s["name"]: (s["overlap"], s["max_running"]) for s in status["schedules"]}
    assert policies == {"solo": ("replace", 2), "plain": ("allow", None)}
    assert "replace (max running 2)" in _ok(cli, "status", "--dsn", dsn)


def test_a_bad_value_writes_nothing(ql3_db: Ql3Database, cli: CliRunner) -> None:
    """Refused before connecting: no task, no schedule."""
    result = cli.invoke(
        app,
        ["schedule", "add", "x", "--cron", "* * * * *", "--overlap", "never",
         "--dsn", ql3_db.dsn("admin")],
    )  # fmt: skip
    assert result.exit_code == 2, result.stdout
    assert "--overlap: 'never' is not one of allow, skip, replace" in result.stderr
    assert sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.tasks") == [(0,)]
