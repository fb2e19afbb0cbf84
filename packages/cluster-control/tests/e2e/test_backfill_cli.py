"""`ql3 schedule backfill` end to end: real `ql3` processes against a throwaway cluster.

The history is real: a `skip` schedule whose cursor lies 20 s back is claimed and committed once
through the repository (what a Coordinator does), which passes the missed occurrences into one
misfire skip record; the CLI then backfills them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import uuid4

from fix_db import db_now_ms, ql3_fails, ql3_ok, run_ql3, sql_rows, wait_for
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    checked_commit,
    resolve_cluster_schedule_decision,
)

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _missed(db: Ql3Database) -> tuple[int, int, int]:
    """Create `bf` (every second, skip, no grace) 20 s back and commit once; its skip record."""
    dsn = db.dsn("admin")
    ql3_ok("schedule", "add", "bf", "--cron", "* * * * * *", "--misfire", "skip",
           "--grace-ms", "0", "--dsn", dsn)  # fmt: skip
    sql_rows(
        db.superuser_dsn,
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - 20000,"
        " created_at_ms = created_at_ms - 20000, updated_at_ms = updated_at_ms - 20000",
    )
    sql_rows(
        db.superuser_dsn,
        "UPDATE ql3.schedule_revisions SET first_cursor_ms = first_cursor_ms - 20000,"
        " placed_after_ms = placed_after_ms - 20000, created_at_ms = created_at_ms - 20000",
    )
    command = ClaimClusterScheduleCommand(owner_id="e2e", claim_token=uuid4(), lease_ms=30_000)
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command, 4)
        repo.commit_decisions(
            [checked_commit(c, resolve_cluster_schedule_decision(c, 256), 256) for c in claims]
        )
    ((first, last, count),) = sql_rows(
        db.superuser_dsn,
        "SELECT first_skipped_ms, last_skipped_ms, skipped_count FROM ql3.skipped_occurrences",
    )
    return first, last, count


def test_schedule_backfill_end_to_end(ql3_db: Ql3Database) -> None:
    """Dry run, batches with a line each, the summary, a rerun admitting nothing; verify ok."""
    dsn = ql3_db.dsn("admin")
    first, last, count = _missed(ql3_db)
    ((cursor,),) = sql_rows(
        ql3_db.superuser_dsn, "SELECT next_due_at_ms FROM ql3.trigger_schedules"
    )
    # Once the clock has passed the cursor, the cursor is what clips --to (before, the clock is).
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) > cursor, timeout_s=5, what="cursor passed")
    span = ("--from", _iso(first - 3_000), "--to", _iso(db_now_ms(ql3_db.superuser_dsn) + 60_000))
    dry = ql3_ok("schedule", "backfill", "bf", *span, "--dry-run", "--dsn", dsn)
    assert f"would admit {count} occurrence(s) of 'bf'" in dry
    assert "--to clipped to" in dry
    assert "the schedule's cursor" in dry
    assert sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.backfills") == [(0,)]
    result = run_ql3(
        "schedule", "backfill", "bf", *span, "--batch", "5", "--request-id", "e2e-1", "--dsn", dsn
    )
    assert result.returncode == 0, result.stderr
    batches = [line for line in result.stderr.splitlines() if line.startswith("batch ")]
    assert len(batches) == -(-count // 5)
    assert "backfill request 'e2e-1'" in result.stderr
    assert f"admitted {count}, already had a Run 0, skipped-before-creation 3" in result.stdout
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT scheduled_for_ms FROM ql3.runs WHERE kind = 'backfill' ORDER BY 1",
    )
    assert [row[0] for row in rows] == list(range(first, last + 1, 1_000))
    rerun = ("schedule", "backfill", "bf", *span, "--request-id", "e2e-1", "--json")
    again = json.loads(ql3_ok(*rerun, "--dsn", dsn))
    assert (again["admitted"], again["already_run"], again["state"]) == (0, count, "done")
    verified = json.loads(ql3_ok("verify", "--json", "--dsn", dsn))
    assert verified["ok"], verified["violations"]


def test_schedule_backfill_refuses_bad_input_naming_the_flag(ql3_db: Ql3Database) -> None:
    """Malformed or reversed times exit 2 naming the flag; an unknown schedule exits 1."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "bf", "--cron", "* * * * * *", "--dsn", dsn)
    good = "2026-01-01T00:00:00+00:00"
    assert "--from" in ql3_fails(2, "schedule", "backfill", "bf", "--from", "yesterday",
                                 "--to", good, "--dsn", dsn)  # fmt: skip
    assert "--to" in ql3_fails(2, "schedule", "backfill", "bf", "--from", good,
                               "--to", "2026-01-01T00:00:00", "--dsn", dsn)  # fmt: skip
    assert "--from" in ql3_fails(2, "schedule", "backfill", "bf", "--from", good,
                                 "--to", "2025-01-01T00:00:00Z", "--dsn", dsn)  # fmt: skip
    assert "ghost" in ql3_fails(1, "schedule", "backfill", "ghost", "--from", good,
                                "--to", good, "--dsn", dsn)  # fmt: skip
    assert sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.backfills") == [(0,)]


def test_a_schedule_file_requests_a_backfill_once(ql3_db: Ql3Database, tmp_path: Path) -> None:
    """`[[backfill]]` in a file: the first apply admits the skipped span, a second finds it."""
    dsn = ql3_db.dsn("admin")
    first, last, count = _missed(ql3_db)
    path = tmp_path / "schedules.toml"
    path.write_text(
        f'[[backfill]]\nschedule = "bf"\nrequest_id = "file-1"\nbatch = 7\n'
        f'from = "{_iso(first)}"\nto = "{_iso(last)}"\n'
    )
    applied = json.loads(ql3_ok("schedule", "apply", str(path), "--json", "--dsn", dsn))
    ((done,),) = [applied["backfilled"]]
    assert (done["admitted"], done["already_run"], done["state"]) == (count, 0, "done")
    again = ql3_ok("schedule", "apply", str(path), "--dsn", dsn)
    assert f"admitted 0, already had a Run {count}" in again
    rows = sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.runs WHERE kind = 'backfill'")
    assert rows == [(count,)]
    assert json.loads(ql3_ok("verify", "--json", "--dsn", dsn))["ok"]
