"""Rule `alert` of `ql3 verify` on `missed` alerts, one per occurrence, against planted defects.

The history is written through the production paths with every Coordinator down: an
every-second schedule asking for `missed`, the database clock (libfaketime) frozen where five of
its occurrences are past their bound, and a worker's `AlertIngress` recording their five
alerts. Each test plants one defect as the schema owner in its own fresh database and requires
exactly that finding; the unmodified history passes (the clean control). Whether an alert names
an occurrence is judged by verify with the cron engine, from the schedule's revisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ingress_helpers import rows
from ql3_cluster_postgres import (
    ALERT_MISSED_MARGIN_MS,
    AlertIngress,
    AlertSettings,
    ScheduleAdmin,
    verify_history,
)
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition
from repo_helpers import owner_conn

if TYPE_CHECKING:
    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database, ThrowawayCluster

MISSED = 5


@pytest.fixture
def history(faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster) -> Ql3Database:
    """Write the history: five occurrences past their bound, their five `missed` alerts."""
    definition = ScheduleDefinition(
        cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        record = admin.add_schedule(
            "watched", definition, alerts=AlertSettings(alert_on=("missed",))
        )
    cursor = record.next_due_at_ms
    assert cursor is not None
    faketime_cluster.freeze_clock_at_ms(cursor + (MISSED - 1) * 1000 + ALERT_MISSED_MARGIN_MS + 500)
    with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
        assert len(ingress.record_due_alerts()) == MISSED
    return faketime_db


def _planted(history: Ql3Database, *statements: str) -> VerifyReport:
    with owner_conn(history) as owner, owner.transaction():
        for statement in statements:
            owner.execute(statement.encode())
    return verify_history(history.dsn("admin"))


def _alert_findings(report: VerifyReport) -> list[str]:
    assert set(report.violation_counts) == {"alert"}, report.lines()
    return [violation.detail for violation in report.violations]


def test_the_unmodified_history_passes(history: Ql3Database) -> None:
    """The clean control: five alerts, each naming an occurrence, once, past its bound."""
    found = rows(history.dsn("owner"), "SELECT count(*) AS n FROM ql3.alerts WHERE kind = 'missed'")
    assert found == [{"n": MISSED}]
    report = _planted(history)
    assert report.ok, report.lines()


def test_an_alert_at_an_instant_that_is_no_occurrence_is_reported(history: Ql3Database) -> None:
    """Half a second after an occurrence of an every-second schedule: no occurrence."""
    report = _planted(
        history,
        "UPDATE ql3.alerts SET subject_key = occurrence_ms + 500, occurrence_ms = occurrence_ms"
        " + 500 WHERE id = (SELECT min(id) FROM ql3.alerts)",
    )
    (finding,) = _alert_findings(report)
    assert finding.startswith("missed alert")
    assert "which is no occurrence of the schedule" in finding
    assert "'* * * * * *' in UTC" in finding


def test_an_alert_outside_the_definition_window_is_reported(history: Ql3Database) -> None:
    """A whole second, but after the schedule's end: no occurrence either."""
    report = _planted(
        history,
        "ALTER TABLE ql3.trigger_schedules DISABLE TRIGGER USER",
        "UPDATE ql3.schedule_revisions SET end_at_ms = (SELECT max(occurrence_ms) - 1000"
        " FROM ql3.alerts)",
        "UPDATE ql3.trigger_schedules SET end_at_ms = (SELECT max(occurrence_ms) - 1000"
        " FROM ql3.alerts)",
    )
    findings = _alert_findings(report)
    assert len(findings) == 1, findings
    assert "outside revision 1's window" in findings[0]


def test_the_same_missed_alert_twice_is_reported(history: Ql3Database) -> None:
    """A duplicate (the UNIQUE key dropped to plant it)."""
    report = _planted(
        history,
        "ALTER TABLE ql3.alerts DROP CONSTRAINT alerts_once",
        "INSERT INTO ql3.alerts (schedule_id, kind, subject_key, occurrence_ms, raised_at_ms,"
        " raised_by, next_delivery_at_ms) SELECT schedule_id, kind, subject_key, occurrence_ms,"
        " raised_at_ms, raised_by, next_delivery_at_ms FROM ql3.alerts"
        " WHERE id = (SELECT min(id) FROM ql3.alerts)",
    )
    (finding,) = _alert_findings(report)
    assert finding.startswith("missed alert for subject")
    assert "recorded 2 times" in finding
