"""Manual Runs beside a real Coordinator (in-process, real database): the cron series untouched.

Triggers land while the Coordinator admits an every-second schedule, one of them planted at the
very millisecond of the occurrence the Coordinator admits next, which it admits anyway (and
settles correctly when its COMMIT reply is lost). The history read back holds every occurrence
exactly once (1 run : 1 attempt : 2 events) and the manual Runs apart.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from fix_db import db_now_ms, sql_rows, wait_for
from history import add_schedules, assert_exact_history, read_history
from ql3_cluster_control import Coordinator
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin
from ql3_testkit import Ql3Database, ThrowawayCluster, WireFaultProxy, plant_manual_run_at_cursor

if TYPE_CHECKING:
    from ql3_runtime_core import AdmittedRun

TRIGGERS = 5


def _plant_at_the_cursor(db: Ql3Database, schedule_id: int) -> int:
    """Plant a manual Run at the cursor: the occurrence the Coordinator admits next."""
    return plant_manual_run_at_cursor(db.dsn("owner"), schedule_id, owner_id="admin")


def test_the_coordinator_admits_every_occurrence_once_beside_triggers(
    ql3_db: Ql3Database,
) -> None:
    """Triggers racing Coordinator cycles: each occurrence once, each trigger one manual Run."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    (schedule_id,) = first
    same_ms = _plant_at_the_cursor(ql3_db, schedule_id)

    def trigger() -> None:
        with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
            for n in range(TRIGGERS):
                admin.trigger_run("s-0", f"beside-{n}")

    triggering = threading.Thread(target=trigger)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        coordinator = Coordinator(repo, owner_id="a")
        triggering.start()
        while triggering.is_alive():
            coordinator.run_cycle()
        triggering.join()
        end = db_now_ms(ql3_db.superuser_dsn) + 1_000
        wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) > end, timeout_s=5, what="one more")
        coordinator.run_cycle()
    cron = assert_exact_history(ql3_db.superuser_dsn, first, end)
    assert (schedule_id, same_ms) in cron.keys
    manual = read_history(ql3_db.superuser_dsn, [schedule_id], kind="manual")
    assert len(manual.runs) == TRIGGERS + 1
    assert all(row[4] == 1 and row[5] == 2 for row in manual.runs)


def test_a_lost_commit_reply_beside_a_manual_run_of_the_same_millisecond(
    ql3_db: Ql3Database, pg_cluster: ThrowawayCluster
) -> None:
    """The settle reads runs by occurrence: the manual Run there is not mistaken for the commit."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    (schedule_id,) = first
    same_ms = _plant_at_the_cursor(ql3_db, schedule_id)
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= same_ms, timeout_s=5, what="due")
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as proxy:
        seen: list[AdmittedRun] = []
        with PostgresScheduleRepository(ql3_db.dsn("runtime", port=str(proxy.port))) as repo:
            proxy.drop_next_commit_reply()
            result = Coordinator(repo, owner_id="a", on_admitted=seen.append).run_cycle()
        assert proxy.commit_replies_dropped == 1
    assert (result.summary.uncertain, result.summary.committed) == (1, 1)
    assert [run.scheduled_for_ms for run in seen] == [same_ms]
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT kind, owner_id FROM ql3.runs WHERE scheduled_for_ms = %s ORDER BY kind",
        [same_ms],
    )
    assert rows == [("cron", "a"), ("manual", "admin")]
