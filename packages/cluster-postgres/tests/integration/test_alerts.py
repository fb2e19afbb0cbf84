"""Alerts recorded exactly once by the database clock, and their delivery attempts (migration 0013).

Every alert here is real (`missed` has its own file, `test_alerts_missed`): no Coordinator
runs, the database clock is moved with libfaketime (`faketime_db`), runs are admitted and failed
through the production paths, and `AlertIngress` (what workers send) records, takes and finishes
alerts. What the database holds
afterwards is read back by column name: one alert per schedule, kind and subject, whoever races.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import uuid4

from ingress_helpers import admit_due, rows, take
from ql3_cluster_postgres import (
    AlertIngress,
    AlertSettings,
    HistoryReader,
    ScheduleAdmin,
    ScheduleSpec,
    WorkerIngress,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
)
from repo_helpers import db_now_ms

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

EVERY_SECOND = ScheduleDefinition(
    cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
)
FAILS_ONCE = TaskExecution(command="false", max_attempts=1, timeout_ms=60_000)


def _alerts(db: Ql3Database) -> list[dict[str, Any]]:
    return rows(
        db.dsn("owner"),
        "SELECT id, kind, subject_key, run_id, pause_id, occurrence_ms, raised_at_ms,"
        " delivery_state, delivery_attempts, next_delivery_at_ms, delivered_at_ms"
        " FROM ql3.alerts ORDER BY id",
    )


def test_failed_paused_and_late_are_each_recorded_once(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A Run that exhausts its attempts: failed, the pause it causes: paused, its deadline: late."""
    spec = ScheduleSpec(
        name="fragile",
        definition=EVERY_SECOND,
        execution=FAILS_ONCE,
        pause_after_failures=1,
        alerts=AlertSettings(alert_on=("failed", "paused", "late"), deadline_ms=2_000),
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
    faketime_cluster.set_clock_offset_ms(3_000)
    (run_id,) = admit_due(faketime_db)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        assert ingress.finish_attempt(attempt.attempt_id, token, failed).recorded
    kinds = {row["kind"]: row for row in _alerts(faketime_db)}
    assert set(kinds) == {"failed", "paused"}
    assert kinds["failed"]["run_id"] == run_id
    (pause,) = rows(faketime_db.dsn("owner"), "SELECT id, cause FROM ql3.schedule_pauses")
    assert (kinds["paused"]["pause_id"], pause["cause"]) == (pause["id"], "failures")
    with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
        assert ingress.record_due_alerts() == []  # its deadline has not passed yet
        faketime_cluster.set_clock_offset_ms(6_000)
        (late,) = ingress.record_due_alerts()
        assert (late.kind, late.subject_key) == ("late", run_id)
        assert ingress.record_due_alerts() == []
    assert sorted(row["kind"] for row in _alerts(faketime_db)) == ["failed", "late", "paused"]
    with HistoryReader(faketime_db.dsn("admin")) as reader:
        listed = reader.alerts(kind="late")
        counts = {c.kind: c.alerts for c in reader.alert_counts()}
    assert [(a.kind, a.run_id, a.schedule) for a in listed] == [("late", run_id, "fragile")]
    assert counts == {"missed": 0, "late": 1, "failed": 1, "paused": 1}


def test_delivery_is_retried_after_its_backoff_then_recorded_delivered(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A failed attempt waits out its backoff (database time); the retry keeps the alert id."""
    spec = ScheduleSpec(
        name="loud",
        definition=EVERY_SECOND,
        execution=FAILS_ONCE,
        alerts=AlertSettings(alert_on=("failed",), webhook="http://127.0.0.1:9/hook"),
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
    faketime_cluster.set_clock_offset_ms(3_000)
    admit_due(faketime_db)
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        (attempt,) = take(ingress, token)
        failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        assert ingress.finish_attempt(attempt.attempt_id, token, failed).recorded
    lease = uuid4()
    with AlertIngress(faketime_db.dsn("worker_ingress")) as alerts:
        (first,) = alerts.take_alerts(lease_token=lease, lease_ms=30_000, limit=4)
        assert (first.attempt_number, first.webhook) == (1, "http://127.0.0.1:9/hook")
        # Held: nobody else takes it, and another lease cannot record its outcome.
        assert alerts.take_alerts(lease_token=uuid4(), lease_ms=30_000, limit=4) == []
        stranger = alerts.finish_alert(
            first.alert_id, lease_token=uuid4(), worker_id="w", started_at_ms=0, error=None
        )
        assert stranger is None
        state = alerts.finish_alert(
            first.alert_id,
            lease_token=lease,
            worker_id="w",
            started_at_ms=first.taken_at_ms,
            error="webhook: HTTP 500",
        )
        assert state == "pending"
        (row,) = _alerts(faketime_db)
        assert (
            row["next_delivery_at_ms"] >= db_now_ms(faketime_db.dsn("owner")) + 500
        )  # 1 s backoff, not yet over
        assert alerts.take_alerts(lease_token=lease, lease_ms=30_000, limit=4) == []
        faketime_cluster.set_clock_offset_ms(5_000)
        (second,) = alerts.take_alerts(lease_token=lease, lease_ms=30_000, limit=4)
        assert (second.alert_id, second.attempt_number) == (first.alert_id, 2)
        delivered = alerts.finish_alert(
            second.alert_id,
            lease_token=lease,
            worker_id="w",
            started_at_ms=second.taken_at_ms,
            error=None,
        )
        assert delivered == "delivered"
        assert alerts.take_alerts(lease_token=lease, lease_ms=30_000, limit=4) == []
    deliveries = rows(
        faketime_db.dsn("admin"),
        "SELECT attempt_number, outcome, error, started_at_ms, finished_at_ms"
        " FROM ql3.alert_deliveries ORDER BY attempt_number",
    )
    assert [(d["attempt_number"], d["outcome"], d["error"]) for d in deliveries] == [
        (1, "failed", "webhook: HTTP 500"),
        (2, "delivered", None),
    ]
    assert deliveries[1]["finished_at_ms"] >= deliveries[0]["finished_at_ms"] + 1_000
    (done,) = _alerts(faketime_db)
    assert (done["delivery_state"], done["delivery_attempts"]) == ("delivered", 2)
