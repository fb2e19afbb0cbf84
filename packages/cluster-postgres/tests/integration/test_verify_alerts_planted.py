"""Rule `alert` of `ql3 verify`, against planted defects in a copy of a real history.

The history is written through the production paths: a schedule asking for `failed` and
`paused` alerts, one Run admitted as a Coordinator does and failed by a worker, which makes the
database record a `failed` alert and (pause after one failure) pause the schedule and record a
`paused` alert. Each test copies it, plants one defect as the schema owner and requires exactly
that finding; the unmodified copy passes (the clean control).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from ingress_helpers import admit_due, rows, take
from planted import copy_of
from ql3_cluster_postgres import (
    AlertSettings,
    ScheduleAdmin,
    ScheduleSpec,
    WorkerIngress,
    verify_history,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
)
from repo_helpers import db_now_ms, owner_conn, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here


@pytest.fixture
def history(ql3_db: Ql3Database) -> Ql3Database:
    """Write the history: one Run failed, its `failed` and `paused` alerts recorded."""
    spec = ScheduleSpec(
        name="fragile",
        definition=ScheduleDefinition(
            cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
        ),
        execution=TaskExecution(command="false", max_attempts=1, timeout_ms=60_000),
        pause_after_failures=1,
        alerts=AlertSettings(alert_on=("failed", "paused")),
    )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
        (record,) = admin.list_schedules()
    due = record.next_due_at_ms
    assert due is not None
    wait_until(lambda: db_now_ms(ql3_db.dsn("owner")) > due, what="the first occurrence due")
    admit_due(ql3_db)
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        assert ingress.finish_attempt(attempt.attempt_id, token, failed).recorded
    kinds = [row["kind"] for row in rows(ql3_db.dsn("owner"), "SELECT kind FROM ql3.alerts")]
    assert sorted(kinds) == ["failed", "paused"]
    return ql3_db


def _planted(
    history: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database], *statements: str
) -> VerifyReport:
    copy = copy_of(history)
    with owner_conn(copy) as owner, owner.transaction():
        for statement in statements:
            owner.execute(statement.encode())
    return verify_history(copy.dsn("admin"))


def _alert_findings(report: VerifyReport) -> list[str]:
    assert set(report.violation_counts) == {"alert"}, report.lines()
    return [violation.detail for violation in report.violations]


def test_the_unmodified_copy_passes(
    history: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The clean control: recorded alerts with their conditions, none missing, none twice."""
    report = _planted(history, copy_of)
    assert report.ok, report.lines()


def test_a_failed_run_without_its_alert_is_reported(
    history: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """A condition past its bound, for a schedule that asked, without its alert."""
    report = _planted(history, copy_of, "DELETE FROM ql3.alerts WHERE kind = 'failed'")
    (finding,) = _alert_findings(report)
    assert "exhausted its attempts" in finding
    assert "no failed alert" in finding


def test_an_alert_without_its_condition_is_reported(
    history: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """A missed alert for an occurrence a Run had decided before the alert was raised."""
    report = _planted(
        history,
        copy_of,
        "INSERT INTO ql3.alerts (schedule_id, kind, subject_key, occurrence_ms, raised_at_ms,"
        " raised_by, next_delivery_at_ms)"
        " SELECT r.schedule_id, 'missed', r.scheduled_for_ms, r.scheduled_for_ms,"
        " r.created_at_ms + 120000, 'planted', r.created_at_ms FROM ql3.runs AS r",
    )
    (finding,) = _alert_findings(report)
    assert finding.startswith("missed alert")
    assert "after a Run or skip record had decided it" in finding


def test_the_same_alert_twice_is_reported(
    history: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """A duplicate (the UNIQUE key dropped in the copy to plant it)."""
    report = _planted(
        history,
        copy_of,
        "ALTER TABLE ql3.alerts DROP CONSTRAINT alerts_once",
        "INSERT INTO ql3.alerts (schedule_id, kind, subject_key, run_id, raised_at_ms, raised_by,"
        " next_delivery_at_ms) SELECT schedule_id, kind, subject_key, run_id, raised_at_ms,"
        " raised_by, next_delivery_at_ms FROM ql3.alerts WHERE kind = 'failed'",
    )
    (finding,) = _alert_findings(report)
    assert finding.startswith("failed alert for subject")
    assert "recorded 2 times" in finding
