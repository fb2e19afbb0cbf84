"""Upgrade to schema 13 (alerts): existing schedules ask for nothing, and raise nothing.

The database is migrated up to the schema before alerts (0013 and later files deleted from a copy
of the shipped folder), given a schedule and a Run whose only attempt failed, then migrated. The
schedule asks for no alert (`alert_on` empty), no alert is recorded for the history, and the
alert functions run on it (nothing is due) until an admin asks for alerts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migration_files import keep_up_to, seed_minute_schedule
from ql3_cluster_postgres import AlertIngress, migrate, record_zone_rules, verify_history
from repo_helpers import fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def test_upgrade_to_alerts_asks_for_nothing_and_records_nothing(
    bare_db: Ql3Database, source: Path
) -> None:
    """Old schedules get `alert_on = {}`; their history raises no alert, before or after."""
    keep_up_to(source, 12)
    migrate(bare_db.dsn("owner"), source=source)
    seed_minute_schedule(bare_db.dsn("owner"))
    migrate(bare_db.dsn("owner"))
    record_zone_rules(bare_db.dsn("owner"))  # as `ql3 migrate` does
    assert fetch(
        bare_db.dsn("admin"), "SELECT alert_on, alert_deadline_ms FROM ql3.trigger_schedules"
    ) == [([], None)]
    # Its cursor is far in the past (epoch 120 s): overdue, but it asked for no `missed`.
    with AlertIngress(bare_db.dsn("worker_ingress")) as alerts:
        assert alerts.record_due_alerts() == []
    assert fetch(bare_db.dsn("admin"), "SELECT count(*) FROM ql3.alerts") == [(0,)]
    report = verify_history(bare_db.dsn("admin"))
    assert "alert" not in report.violation_counts
