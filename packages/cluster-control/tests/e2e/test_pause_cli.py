"""Pause and resume end to end: real `ql3` processes against a throwaway cluster.

The CLI pauses with a reason and an until, lists the span, resumes with a replay, and refuses bad
input by name writing nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fix_db import ql3_fails, ql3_ok, sql_rows

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_pause_resume_and_the_recorded_span_from_the_cli(ql3_db: Ql3Database) -> None:
    """Reason and until recorded by the database; resume's replay recorded; bad input exit 2."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "tick", "--cron", "* * * * * *", "--dsn", dsn)
    before = sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.schedule_pauses")
    assert "until" in ql3_fails(
        2, "schedule", "pause", "tick", "--until", "2020-01-01T00:00:00+00:00", "--dsn", dsn
    )
    assert sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.schedule_pauses") == before
    paused = ql3_ok(
        "schedule", "pause", "tick", "--reason", "deploy freeze", "--until", "1h", "--dsn", dsn
    )
    assert "paused until" in paused
    status = json.loads(ql3_ok("status", "--json", "--dsn", dsn))
    assert [span["reason"] for span in status["paused"]] == ["deploy freeze"]
    (listed,) = json.loads(ql3_ok("schedule", "list", "--json", "--dsn", dsn))
    assert listed["pause"]["reason"] == "deploy freeze"
    assert listed["pause"]["until_ms"] == listed["pause"]["paused_at_ms"] + 3_600_000
    assert "replay" in ql3_fails(2, "schedule", "resume", "tick", "--replay", "all", "--dsn", dsn)
    assert "active" in ql3_ok("schedule", "resume", "tick", "--replay", "fire_once", "--dsn", dsn)
    table = ql3_ok("schedule", "pauses", "tick", "--dsn", dsn)
    assert "deploy freeze" in table
    assert "fire_once" in table
    assert json.loads(ql3_ok("verify", "--json", "--dsn", dsn))["ok"]
