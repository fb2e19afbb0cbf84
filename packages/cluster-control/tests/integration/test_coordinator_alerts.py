"""A Coordinator's idle polls record due alerts too (migration 0013), not only workers.

A schedule asking for `missed` is moved ten minutes into the past (as the superuser) while
another replica holds its claim, so the idle service under test cannot decide it; its idle poll
records the `missed` alert for the cursor, once, through `ql3.record_due_alerts_v1`.
"""

from __future__ import annotations

import threading
import uuid

from fix_db import sql_rows, wait_for
from ql3_cluster_control import CoordinatorService, load_settings
from ql3_cluster_postgres import AlertSettings, PostgresScheduleRepository, ScheduleAdmin
from ql3_runtime_core import ClaimClusterScheduleCommand, ScheduleDefinition
from ql3_testkit import Ql3Database  # noqa: TC002  # pytest resolves fixture annotations


def test_an_idle_coordinator_records_a_missed_occurrence_once(ql3_db: Ql3Database) -> None:
    """The held, overdue cursor is recorded missed by the idle replica, and only once."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        record = admin.add_schedule(
            "watched",
            ScheduleDefinition(cron="* * * * *", misfire_grace_ms=0),
            alerts=AlertSettings(alert_on=("missed",)),
        )
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - 600000,"
        " updated_at_ms = updated_at_ms - 600000 WHERE id = %s",
        (record.schedule_id,),
    )
    ((cursor,),) = sql_rows(
        ql3_db.superuser_dsn, "SELECT next_due_at_ms FROM ql3.trigger_schedules"
    )
    settings = load_settings(dsn=ql3_db.dsn("runtime"), owner_id="idle", poll_interval_ms=200)
    service = CoordinatorService(settings)
    alerts = "SELECT kind, occurrence_ms FROM ql3.alerts"
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as holder:
        command = ClaimClusterScheduleCommand(
            owner_id="holder", claim_token=uuid.uuid4(), lease_ms=60_000
        )
        (claim,) = holder.claim_due_schedules(command, 1)
        thread = threading.Thread(target=service.run)
        thread.start()
        try:
            wait_for(
                lambda: sql_rows(ql3_db.superuser_dsn, alerts) != [],
                timeout_s=15,
                what="the missed alert",
            )
        finally:
            service.request_stop()
            thread.join(20)
        holder.release_claims([claim])
    assert not thread.is_alive()
    assert sql_rows(ql3_db.superuser_dsn, alerts) == [("missed", cursor)]
