"""`ql3 schedule trigger` end to end: real `ql3` processes against a throwaway cluster."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

from fix_db import ql3_fails, ql3_ok, sql_rows

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def test_schedule_trigger_end_to_end(ql3_db: Ql3Database) -> None:
    """One Run per request id, printed; counted apart by runs list, status and verify."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "report", "--cron", "0 3 * * *", "--dsn", dsn)
    first = ql3_ok("schedule", "trigger", "report", "--request-id", "deploy-42", "--dsn", dsn)
    assert "manual run" in first
    assert "'deploy-42'" in first
    again = ql3_ok("schedule", "trigger", "report", "--request-id", "deploy-42", "--dsn", dsn)
    assert "already admitted" in again
    generated = json.loads(
        ql3_ok(
            "schedule", "trigger", "report", "--payload", '{"why": "test"}', "--json", "--dsn", dsn
        )
    )
    assert generated["payload"] == {"why": "test"}
    assert not generated["existed"]
    assert str(uuid.UUID(generated["request_id"])) == generated["request_id"]
    rows = sql_rows(ql3_db.superuser_dsn, "SELECT kind, request_id FROM ql3.runs ORDER BY id")
    assert rows == [("manual", "deploy-42"), ("manual", generated["request_id"])]
    listed = json.loads(ql3_ok("runs", "list", "--kind", "manual", "--json", "--dsn", dsn))
    assert [run["request_id"] for run in listed] == [generated["request_id"], "deploy-42"]
    assert json.loads(ql3_ok("runs", "list", "--kind", "cron", "--json", "--dsn", dsn)) == []
    assert "manual (deploy-42)" in ql3_ok("runs", "list", "--dsn", dsn)
    status = json.loads(ql3_ok("status", "--json", "--dsn", dsn))
    ((report,),) = [[s for s in status["schedules"] if s["name"] == "report"]]
    assert (report["runs_admitted"], report["manual_runs"]) == (0, 2)
    verified = json.loads(ql3_ok("verify", "--json", "--dsn", dsn))
    assert (verified["ok"], verified["runs"], verified["manual_runs"]) == (True, 0, 2)
    assert "2 manual runs" in ql3_ok("verify", "--dsn", dsn)
    assert "ghost" in ql3_fails(1, "schedule", "trigger", "ghost", "--dsn", dsn)
    assert "request_id" in ql3_fails(
        2, "schedule", "trigger", "report", "--request-id", "deploy-42", "--payload", "{}",
        "--dsn", dsn,
    )  # fmt: skip
    ql3_ok("schedule", "retire", "report", "--dsn", dsn)
    assert "retired" in ql3_fails(1, "schedule", "trigger", "report", "--dsn", dsn)


def test_a_schedule_file_requests_a_manual_run_once(ql3_db: Ql3Database, tmp_path: Path) -> None:
    """`[[trigger]]` in a file: the first apply admits the Run, applying again finds it."""
    dsn = ql3_db.dsn("admin")
    path = tmp_path / "schedules.toml"
    path.write_text(
        '[[schedule]]\nname = "report"\ncron = "0 3 * * *"\n'
        '[[trigger]]\nschedule = "report"\nrequest_id = "rerun-7"\npayload = { day = "mon" }\n'
    )
    first = json.loads(ql3_ok("schedule", "apply", str(path), "--json", "--dsn", dsn))
    assert first["created"] == ["report"]
    ((run,),) = [first["triggered"]]
    assert (run["request_id"], run["payload"], run["existed"]) == ("rerun-7", {"day": "mon"}, False)
    again = ql3_ok("schedule", "apply", str(path), "--dsn", dsn)
    assert "unchanged 1" in again
    assert "'rerun-7' was already admitted" in again
    rows = sql_rows(ql3_db.superuser_dsn, "SELECT id, kind, request_id FROM ql3.runs")
    assert rows == [(run["run_id"], "manual", "rerun-7")]
