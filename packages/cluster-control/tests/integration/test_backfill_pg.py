"""A backfill beside a real Coordinator (in-process, real database): both histories exact.

An every-second `skip` schedule with no grace starts ten seconds behind, so the Coordinator's
cycles pass occurrences into misfire skip records while a backfill, in batches of two, admits
the skipped ones of the span in another session. The backfill only reads the schedule row (the
Coordinator's claim and commit are not disturbed); the history read back holds every skipped
occurrence once as a backfilled Run linked to its record, the cron Runs apart, and verify passes.
"""

from __future__ import annotations

import threading
from typing import Any

from fix_db import db_now_ms, sql_rows
from ql3_cluster_control import Coordinator
from ql3_cluster_postgres import (
    BackfillReport,
    PostgresScheduleRepository,
    ScheduleAdmin,
    verify_history,
)
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition
from ql3_testkit import Ql3Database  # noqa: TC002  # pytest resolves fixture annotations

BEHIND_MS = 10_000


def test_a_backfill_racing_the_coordinator_admits_each_skipped_occurrence_once(
    ql3_db: Ql3Database,
) -> None:
    """Coordinator cycles and backfill batches interleave: one Run per occurrence, verify ok."""
    definition = ScheduleDefinition(
        cron="* * * * * *", misfire_policy=MisfirePolicy.SKIP, misfire_grace_ms=0
    )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        record = admin.add_schedule("s-0", definition)
    for statement in (
        (
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - %(s)s,"
            " created_at_ms = created_at_ms - %(s)s, updated_at_ms = updated_at_ms - %(s)s"
        ),
        (
            "UPDATE ql3.schedule_revisions SET first_cursor_ms = first_cursor_ms - %(s)s,"
            " placed_after_ms = placed_after_ms - %(s)s, created_at_ms = created_at_ms - %(s)s"
        ),
    ):
        sql_rows(ql3_db.superuser_dsn, statement, {"s": BEHIND_MS})
    assert record.next_due_at_ms is not None
    first = record.next_due_at_ms - BEHIND_MS
    reports: list[BackfillReport] = []
    errors: list[BaseException] = []
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        coordinator = Coordinator(repo, owner_id="a")
        coordinator.run_cycle()  # the first skip record, before the backfill starts
        until = db_now_ms(ql3_db.superuser_dsn) + 2_000

        def fill() -> None:
            try:
                with ScheduleAdmin(ql3_db.dsn("admin")) as backfiller:
                    reports.append(
                        backfiller.backfill("s-0", first, until, request_id="race", batch_size=2)
                    )
            except BaseException as exc:  # noqa: BLE001  # reported by the assertion below
                errors.append(exc)

        filling = threading.Thread(target=fill)
        filling.start()
        cycles = 0
        while filling.is_alive() or cycles < 3:
            coordinator.run_cycle()
            cycles += 1
        filling.join()
    assert not errors, errors
    skipped: set[int] = set()
    for low, high in sql_rows(
        ql3_db.superuser_dsn,
        "SELECT first_skipped_ms, last_skipped_ms FROM ql3.skipped_occurrences",
    ):
        skipped |= set(range(low, high + 1, 1_000))
    runs: list[tuple[Any, ...]] = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT r.scheduled_for_ms, r.kind, k.first_skipped_ms <= r.scheduled_for_ms"
        " AND r.scheduled_for_ms <= k.last_skipped_ms FROM ql3.runs AS r"
        " LEFT JOIN ql3.skipped_occurrences AS k ON k.id = r.supersedes_skip_id",
    )
    instants = [row[0] for row in runs]
    assert len(instants) == len(set(instants))  # one Run per occurrence, whoever wrote it
    backfilled = {row[0] for row in runs if row[1] == "backfill"}
    assert all(row[2] for row in runs if row[1] == "backfill")
    (report,) = reports
    # Everything the plan saw skipped (the first record, at least) was admitted by the backfill.
    assert report.admitted == len(report.plan.occurrences) >= BEHIND_MS // 1_000 - 2
    assert backfilled == {at for at, _ in report.plan.occurrences} <= skipped
    assert not backfilled & {row[0] for row in runs if row[1] == "cron"}
    verified = verify_history(ql3_db.dsn("admin"))
    assert verified.ok, verified.lines()
