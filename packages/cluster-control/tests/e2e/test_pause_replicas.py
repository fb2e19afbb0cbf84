"""Auto-resume and pause after failures with real `ql3 run` and `ql3 worker` processes.

With a running replica and a worker, a short until ends the span by itself and a failing command
pauses its schedule after two failed runs, each waited for as a condition read from the
database; verify finds the history clean.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fix_db import ql3_ok, sql_rows, wait_for

if TYPE_CHECKING:
    from fix_replicas import Replicas
    from fix_workers import Workers
    from ql3_testkit import Ql3Database


def test_a_running_replica_ends_an_until_and_failures_pause_a_schedule(
    ql3_db: Ql3Database, replicas: Replicas, workers: Workers
) -> None:
    """An until of 2 s ends by itself (one automatic resume); two failed runs pause `broken`."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "tick", "--cron", "* * * * * *", "--dsn", dsn)
    ql3_ok(
        "schedule", "add", "broken", "--cron", "* * * * * *", "--command", "exit 3",
        "--max-attempts", "1", "--misfire", "skip", "--pause-after-failures", "2", "--dsn", dsn,
    )  # fmt: skip
    ql3_ok("schedule", "pause", "tick", "--reason", "short", "--until", "2s", "--dsn", dsn)
    replicas.start("r1", ql3_db.dsn("runtime"))
    workers.start("w1", ql3_db)
    owner = ql3_db.superuser_dsn

    def resumed() -> bool:
        rows = sql_rows(
            owner,
            "SELECT p.automatic FROM ql3.schedule_pauses AS p JOIN ql3.trigger_schedules AS s"
            " ON s.id = p.schedule_id JOIN ql3.tasks AS t ON t.id = s.task_id"
            " WHERE t.name = 'tick' AND p.resumed_at_ms IS NOT NULL",
        )
        return rows == [(True,)]

    def broken_paused() -> bool:
        rows = sql_rows(
            owner,
            "SELECT count(*) FROM ql3.schedule_pauses WHERE cause = 'failures'"
            " AND resumed_at_ms IS NULL",
        )
        return rows == [(1,)]

    wait_for(resumed, timeout_s=60, what="the until resumed by the replica")
    wait_for(broken_paused, timeout_s=60, what="broken paused after two failed runs")
    replicas.stop_all()
    (span,) = json.loads(ql3_ok("schedule", "pauses", "broken", "--json", "--dsn", dsn))
    assert span["reason"].startswith("2 consecutive failed runs, last run ")
    (tick,) = json.loads(ql3_ok("schedule", "pauses", "tick", "--json", "--dsn", dsn))
    assert (tick["replay"], tick["end_ms"]) == ("skip", tick["until_ms"])
    records = sql_rows(
        owner, "SELECT count(*) FROM ql3.skipped_occurrences WHERE reason = 'paused'"
    )
    assert records == [(1 if tick["skipped_count"] else 0,)]
    verified = json.loads(ql3_ok("verify", "--json", "--dsn", dsn))
    assert verified["ok"], verified
