"""`ql3 history prune` end to end: real `ql3` processes against a throwaway cluster.

Bad durations and a duration below the refusal bound are refused by name (exit 2) writing
nothing; a dry run reports per schedule and writes nothing; verify still passes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fix_db import ql3_fails, ql3_ok, sql_rows

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_prune_refuses_by_name_and_a_dry_run_writes_nothing(ql3_db: Ql3Database) -> None:
    """Bad text and too short a duration name --older-than; a dry run changes no row."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "tick", "--cron", "* * * * * *", "--dsn", dsn)
    count = "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.history_checkpoints)"
    before = sql_rows(ql3_db.superuser_dsn, count)
    for text in ("3w", "12", "1.5h"):
        assert "--older-than" in ql3_fails(
            2, "history", "prune", "--older-than", text, "--dsn", dsn
        )
    refused = ql3_fails(2, "history", "prune", "--older-than", "1m", "--dsn", dsn)
    assert "--older-than" in refused
    assert "at least" in refused
    assert "--batch" in ql3_fails(
        2, "history", "prune", "--older-than", "30d", "--batch", "0", "--dsn", dsn
    )
    report = json.loads(
        ql3_ok("history", "prune", "--older-than", "30d", "--dry-run", "--json", "--dsn", dsn)
    )
    assert report["dry_run"] is True
    assert report["checkpoints"] == []
    assert "removed 0 run(s)" in ql3_ok("history", "prune", "--older-than", "30d", "--dsn", dsn)
    assert sql_rows(ql3_db.superuser_dsn, count) == before
    assert json.loads(ql3_ok("verify", "--json", "--dsn", dsn))["ok"]
