"""`missed` alerts, one per occurrence, with every Coordinator down (migration 0013, `_missed`).

No Coordinator runs. The database clock (libfaketime, `faketime_db`) is frozen at an instant past
the bound of exactly N occurrences of an every-second schedule, so how many are missed is known
exactly; workers (`AlertIngress.record_due_alerts`, what every worker sends) then record them,
racing. `ql3.record_missed_alerts_v1` is also called directly with what a wrong or stale caller
would hand it: it re-checks everything under the database clock and records nothing of it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import rows
from ql3_cluster_postgres import (
    ALERT_MISSED_MARGIN_MS,
    AlertIngress,
    AlertSettings,
    PostgresScheduleRepository,
    ScheduleAdmin,
)
from ql3_runtime_core import ClaimClusterScheduleCommand, MisfirePolicy, ScheduleDefinition

if TYPE_CHECKING:
    from ql3_cluster_postgres import RecordedAlert
    from ql3_testkit import Ql3Database, ThrowawayCluster

EVERY_SECOND = ScheduleDefinition(
    cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
)
WATCHED = AlertSettings(alert_on=("missed",))


def _missed(db: Ql3Database) -> list[int]:
    found = rows(
        db.dsn("owner"),
        "SELECT occurrence_ms FROM ql3.alerts WHERE kind = 'missed' ORDER BY occurrence_ms",
    )
    return [row["occurrence_ms"] for row in found]


def _watched(db: Ql3Database) -> int:
    with ScheduleAdmin(db.dsn("admin")) as admin:
        record = admin.add_schedule("watched", EVERY_SECOND, alerts=WATCHED)
    assert record.next_due_at_ms is not None
    return record.next_due_at_ms


def _freeze_past(cluster: ThrowawayCluster, cursor: int, occurrences: int) -> None:
    """Stop the clock where exactly `occurrences` seconds from `cursor` are past their bound."""
    cluster.freeze_clock_at_ms(cursor + (occurrences - 1) * 1000 + ALERT_MISSED_MARGIN_MS + 500)


def test_racing_workers_record_one_alert_per_missed_occurrence(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Seven occurrences past their bound: seven alerts, each once; later calls continue."""
    cursor = _watched(faketime_db)
    with AlertIngress(faketime_db.dsn("worker_ingress")) as early:
        assert early.record_due_alerts() == []  # due, but not past due + margin + grace yet
    _freeze_past(faketime_cluster, cursor, 7)

    start = threading.Barrier(2)
    recorded: list[list[RecordedAlert]] = []

    def worker() -> None:
        with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
            start.wait()
            recorded.append(ingress.record_due_alerts())

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    expected = [cursor + k * 1000 for k in range(7)]
    returned = sorted(alert.subject_key for found in recorded for alert in found)
    assert returned == expected  # each recorded by exactly one of the racing workers
    assert {alert.kind for found in recorded for alert in found} == {"missed"}
    assert _missed(faketime_db) == expected
    with AlertIngress(faketime_db.dsn("worker_ingress")) as again:
        assert again.record_due_alerts() == []
        # Three more seconds past their bound: exactly those three, after the last one recorded.
        _freeze_past(faketime_cluster, cursor, 10)
        more = again.record_due_alerts()
    assert [alert.subject_key for alert in more] == [cursor + k * 1000 for k in range(7, 10)]
    assert _missed(faketime_db) == [cursor + k * 1000 for k in range(10)]
    stored = rows(faketime_db.dsn("owner"), "SELECT detail FROM ql3.alerts")
    assert all(
        row["detail"]["bound_ms"] == row["detail"]["occurrence_ms"] + ALERT_MISSED_MARGIN_MS
        for row in stored
    )


def test_a_long_outage_is_recorded_a_thousand_occurrences_per_call(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """1 500 missed seconds: the cursor and 1 000 at the first call, the 499 left at the next."""
    cursor = _watched(faketime_db)
    _freeze_past(faketime_cluster, cursor, 1500)
    with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
        first = ingress.record_due_alerts()
        second = ingress.record_due_alerts()
        third = ingress.record_due_alerts()
    assert [len(first), len(second), len(third)] == [1001, 499, 0]
    assert _missed(faketime_db) == [cursor + k * 1000 for k in range(1500)]


def test_an_idle_coordinator_records_them_with_its_loaded_zone_rules(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """The repository (a Coordinator's idle poll) computes them in the same place, once each."""
    cursor = _watched(faketime_db)
    _freeze_past(faketime_cluster, cursor, 4)
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as repository:
        assert repository.record_due_alerts() == 4
        assert repository.record_due_alerts() == 0
    with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
        assert ingress.record_due_alerts() == []
    assert _missed(faketime_db) == [cursor + k * 1000 for k in range(4)]


def _record_missed(db: Ql3Database, params: dict[str, Any]) -> list[dict[str, Any]]:
    return rows(
        db.dsn("worker_ingress"),
        "SELECT alert_id, subject_key FROM ql3.record_missed_alerts_v1("
        "%(schedule)s, %(cursor)s, %(rules)s, %(occurrences)s::bigint[])",
        params,
    )


def test_what_a_caller_hands_over_is_rechecked_under_the_database_clock(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Wrong rules, a moved cursor, a live claim, early or old instants: nothing recorded."""
    cursor = _watched(faketime_db)
    owner = faketime_db.dsn("owner")
    (schedule,) = [row["id"] for row in rows(owner, "SELECT id FROM ql3.trigger_schedules")]
    (rules,) = [row["version"] for row in rows(owner, "SELECT version FROM ql3.zone_rules")]
    _freeze_past(faketime_cluster, cursor, 3)
    good = {"schedule": schedule, "cursor": cursor, "rules": rules}
    # Computed with other zone rules, or against a cursor that moved meanwhile: refused whole.
    assert (
        _record_missed(faketime_db, {**good, "rules": "1999z", "occurrences": [cursor + 1000]})
        == []
    )
    moved = {**good, "cursor": cursor + 1000, "occurrences": [cursor + 2000]}
    assert _record_missed(faketime_db, moved) == []
    # At or before the cursor, or not yet past its bound: left out; the rest recorded once.
    handed = [cursor, cursor - 1000, cursor + 1000, cursor + 1000, cursor + 3000]
    recorded = _record_missed(faketime_db, {**good, "occurrences": handed})
    assert [row["subject_key"] for row in recorded] == [cursor + 1000]
    assert _record_missed(faketime_db, {**good, "occurrences": [cursor + 1000]}) == []
    # A live claim (a Coordinator deciding it now): refused.
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as holder:
        command = ClaimClusterScheduleCommand(
            owner_id="holder", claim_token=uuid4(), lease_ms=60_000
        )
        (claim,) = holder.claim_due_schedules(command, 1)
        assert _record_missed(faketime_db, {**good, "occurrences": [cursor + 2000]}) == []
        holder.release_claims([claim])
    assert _missed(faketime_db) == [cursor + 1000]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_occurrences"):
        _record_missed(faketime_db, {**good, "occurrences": list(range(1001))})


def test_callers_without_the_recorded_zone_rules_record_only_the_cursors_alert(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Recorded rules no caller holds: the cursor alone; the recorded ones back: the rest."""
    cursor = _watched(faketime_db)
    (recorded,) = rows(faketime_db.dsn("owner"), "SELECT version FROM ql3.zone_rules")
    switch = "UPDATE ql3.zone_rules SET version = %s"
    rows(faketime_db.superuser_dsn, switch + " RETURNING version", ("1999z",))
    _freeze_past(faketime_cluster, cursor, 4)
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as repository:
        assert repository.record_due_alerts() == 1
    with AlertIngress(faketime_db.dsn("worker_ingress")) as ingress:
        assert ingress.record_due_alerts() == []
        assert _missed(faketime_db) == [cursor]
        rows(faketime_db.superuser_dsn, switch + " RETURNING version", (recorded["version"],))
        later = ingress.record_due_alerts()
    assert [alert.subject_key for alert in later] == [cursor + k * 1000 for k in range(1, 4)]
    assert _missed(faketime_db) == [cursor + k * 1000 for k in range(4)]
