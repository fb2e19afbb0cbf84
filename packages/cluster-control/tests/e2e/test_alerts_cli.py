"""`ql3 schedule add --alert-*` and `ql3 alerts list` end to end: real `ql3` processes.

No Coordinator runs: the database clock (libfaketime) is frozen past the occurrence's bound and
the alert is recorded through what workers send (`AlertIngress.record_due_alerts`); the command
line then lists what the database holds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from fix_db import ql3_ok, sql_rows
from ql3_cluster_postgres import ALERT_MISSED_MARGIN_MS, AlertIngress

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster


def test_alert_flags_are_stored_and_alerts_listed(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """The flags land on the schedule; the missed alert is listed with its occurrence."""
    dsn = faketime_db.dsn("admin")
    ql3_ok(
        "schedule", "add", "nightly", "--cron", "* * * * * *", "--grace-ms", "0",
        "--alert-on", "missed,late", "--alert-deadline", "90s",
        "--alert-webhook", "https://ops.example/ql3", "--dsn", dsn,
    )  # fmt: skip
    stored = sql_rows(
        faketime_db.superuser_dsn,
        "SELECT alert_on, alert_webhook, alert_deadline_ms, next_due_at_ms"
        " FROM ql3.trigger_schedules",
    )
    ((kinds, webhook, deadline, cursor),) = stored
    assert (kinds, webhook, deadline) == (["missed", "late"], "https://ops.example/ql3", 90_000)
    assert json.loads(ql3_ok("alerts", "list", "--json", "--dsn", dsn)) == []
    # Frozen where the cursor alone is past its bound (one alert per occurrence).
    faketime_cluster.freeze_clock_at_ms(cursor + ALERT_MISSED_MARGIN_MS + 500)
    with AlertIngress(faketime_db.dsn("worker_ingress")) as alerts:
        (recorded,) = alerts.record_due_alerts()
    listed = json.loads(ql3_ok("alerts", "list", "--kind", "missed", "--json", "--dsn", dsn))
    assert [(a["alert_id"], a["kind"], a["schedule"], a["occurrence_ms"]) for a in listed] == [
        (recorded.alert_id, "missed", "nightly", cursor)
    ]
    assert listed[0]["delivery_state"] == "pending"
    assert json.loads(ql3_ok("alerts", "list", "--kind", "late", "--json", "--dsn", dsn)) == []
    text = ql3_ok("alerts", "list", "--schedule", "nightly", "--dsn", dsn)
    assert "missed" in text
    assert "pending" in text
