"""`missed` alerts, one per occurrence, around Coordinators going away and coming back (0013).

First, a Coordinator's idle polls record due alerts too, not only workers: a schedule asking for
`missed` is moved ten minutes into the past (as the superuser) while another replica holds its
claim, so the idle service under test cannot decide it; its idle poll records the `missed` alert
of the cursor, once (the claim holder is deciding the rest).

Then the whole story with real processes' classes on threads: every Coordinator stopped, the
database clock (libfaketime) frozen where exactly N occurrences of an every-second schedule are
past their bound, two real `Worker`s racing record exactly those N; a Coordinator comes back,
decides the backlog and then each occurrence on time; with it stopped again and the clock moved
past the bound of everything it decided, only the occurrence it left undecided is alerted.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING

from fix_db import db_now_ms, sql_rows, wait_for
from ql3_cluster_control import CoordinatorService, Worker, WorkerSettings, load_settings
from ql3_cluster_postgres import (
    ALERT_MISSED_MARGIN_MS,
    AlertSettings,
    PostgresScheduleRepository,
    ScheduleAdmin,
)
from ql3_runtime_core import ClaimClusterScheduleCommand, MisfirePolicy, ScheduleDefinition
from ql3_testkit import Ql3Database  # noqa: TC002  # pytest resolves fixture annotations

if TYPE_CHECKING:
    from ql3_testkit import ThrowawayCluster

_MISSED = "SELECT occurrence_ms FROM ql3.alerts WHERE kind = 'missed' ORDER BY occurrence_ms"


def _missed(db: Ql3Database) -> list[int]:
    return [row[0] for row in sql_rows(db.superuser_dsn, _MISSED)]


def test_an_idle_coordinator_records_the_held_cursor_missed_once(ql3_db: Ql3Database) -> None:
    """The held, overdue cursor is recorded missed by the idle replica, and only once.

    The occurrences after it are not: a live claim means a Coordinator is deciding the schedule
    now (`ql3.record_missed_alerts_v1` refuses while one holds it); they are recorded once it
    expires, if it decided nothing.
    """
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
    cursor = _cursor(ql3_db)
    settings = load_settings(dsn=ql3_db.dsn("runtime"), owner_id="idle", poll_interval_ms=200)
    service = CoordinatorService(settings)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as holder:
        command = ClaimClusterScheduleCommand(
            owner_id="holder", claim_token=uuid.uuid4(), lease_ms=60_000
        )
        (claim,) = holder.claim_due_schedules(command, 1)
        thread = threading.Thread(target=service.run)
        thread.start()
        try:
            wait_for(lambda: _missed(ql3_db) != [], timeout_s=15, what="the missed alert")
        finally:
            service.request_stop()
            thread.join(20)
        assert _missed(ql3_db) == [cursor]
        holder.release_claims([claim])
    assert not thread.is_alive()


def _workers(db: Ql3Database) -> tuple[list[Worker], list[threading.Thread]]:
    workers = [
        Worker(WorkerSettings(dsn=db.dsn("worker_ingress"), id=f"w{i}", poll_interval_ms=50))
        for i in range(2)
    ]
    threads = [threading.Thread(target=worker.run, daemon=True) for worker in workers]
    for thread in threads:
        thread.start()
    return workers, threads


def _cursor(db: Ql3Database) -> int:
    ((cursor,),) = sql_rows(db.superuser_dsn, "SELECT next_due_at_ms FROM ql3.trigger_schedules")
    return int(cursor)


def _decided_after(db: Ql3Database, after_ms: int) -> list[int]:
    statement = (
        "SELECT scheduled_for_ms FROM ql3.runs WHERE kind = 'cron' AND scheduled_for_ms > %s"
        " ORDER BY scheduled_for_ms"
    )
    return [row[0] for row in sql_rows(db.superuser_dsn, statement, (after_ms,))]


def test_missed_per_occurrence_while_coordinators_are_down_and_none_once_one_is_back(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """N past their bound: N alerts by racing workers; what a Coordinator decides: none."""
    started_ms = db_now_ms(faketime_db.superuser_dsn)  # offset 0: the clock runs as the host's
    definition = ScheduleDefinition(
        cron="* * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=0
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        record = admin.add_schedule(
            "watched", definition, alerts=AlertSettings(alert_on=("missed",))
        )
    cursor = record.next_due_at_ms
    assert cursor is not None
    missed = 6
    frozen_ms = cursor + (missed - 1) * 1000 + ALERT_MISSED_MARGIN_MS + 500
    faketime_cluster.freeze_clock_at_ms(frozen_ms)
    expected = [cursor + k * 1000 for k in range(missed)]
    workers, threads = _workers(faketime_db)
    try:
        wait_for(lambda: len(_missed(faketime_db)) >= missed, timeout_s=30, what="N alerts")
        assert _missed(faketime_db) == expected
        # A Coordinator comes back: it decides the backlog, then (the clock running again from
        # where it stood) each occurrence on time.
        settings = load_settings(
            dsn=faketime_db.dsn("runtime"), owner_id="back", poll_interval_ms=100
        )
        service = CoordinatorService(settings)
        thread = threading.Thread(target=service.run)
        thread.start()
        try:
            wait_for(lambda: _cursor(faketime_db) > frozen_ms, timeout_s=30, what="the backlog")
            faketime_cluster.set_clock_offset_ms(frozen_ms - started_ms)
            wait_for(
                lambda: len(_decided_after(faketime_db, frozen_ms)) >= 3,
                timeout_s=30,
                what="three occurrences decided on time",
            )
        finally:
            service.request_stop()
            thread.join(20)
        assert not thread.is_alive()
        decided = _decided_after(faketime_db, frozen_ms)
        assert _missed(faketime_db) == expected
        # Every Coordinator down again; the clock past the bound of all it decided and of the
        # one occurrence it left: that one alone is missed.
        left = _cursor(faketime_db)
        assert left > decided[-1]
        faketime_cluster.freeze_clock_at_ms(left + ALERT_MISSED_MARGIN_MS + 500)
        wait_for(lambda: len(_missed(faketime_db)) > missed, timeout_s=30, what="the one left")
    finally:
        for worker in workers:
            worker.request_stop()
        for worker_thread in threads:
            worker_thread.join(timeout=30)
    assert _missed(faketime_db) == [*expected, left]
