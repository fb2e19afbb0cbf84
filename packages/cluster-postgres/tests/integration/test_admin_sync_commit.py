"""An admin change acknowledged only with the sync-rep WARNING is uncertain, then settled.

A primary whose commits wait for a synchronous standby; the standby is stopped, so the admin's
COMMIT waits; another session cancels that wait and PostgreSQL answers success with the WARNING:
the schedule exists on the primary only. `ScheduleAdmin` must not report that as done. It settles
the change on a fresh connection after a durability barrier: while no standby confirms, the call
fails as uncertain; once commits are acknowledged cleanly, the durable schedule is the answer,
written once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import ScheduleAdmin
from ql3_runtime_core import RepositoryUnavailableError, ScheduleDefinition
from repo_helpers import fetch, wait_until
from sync_rep import drop_standby_requirement, end_sync_waits

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

ADMIN_USER = "ql3_login_admin"
HOURLY = ScheduleDefinition(cron="0 * * * *")
_COUNTS = (
    "SELECT (SELECT count(*) FROM ql3.trigger_schedules),"
    " (SELECT count(*) FROM ql3.schedule_revisions)"
)


def _add_in_thread(admin: ScheduleAdmin, results: list[Any]) -> threading.Thread:
    def add() -> None:
        try:
            results.append(admin.add_schedule("nightly", HOURLY))
        except Exception as exc:  # noqa: BLE001  # the test inspects what came back
            results.append(exc)

    thread = threading.Thread(target=add)
    thread.start()
    return thread


def _cancel_the_wait(primary: ThrowawayCluster) -> None:
    wait_until(lambda: end_sync_waits(primary, ADMIN_USER) > 0, what="the COMMIT waits")


def test_an_add_acknowledged_with_the_warning_is_not_reported_done(
    sync_primary: tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database],
) -> None:
    """While no standby confirms, the add fails as uncertain instead of claiming success."""
    primary, standby, database = sync_primary
    standby.stop()  # from now on every commit on the primary waits for ever
    results: list[Any] = []
    with ScheduleAdmin(database.dsn("admin"), durability_timeout_ms=300) as admin:
        thread = _add_in_thread(admin, results)
        _cancel_the_wait(primary)
        thread.join(30)
    assert not thread.is_alive()
    (outcome,) = results
    assert isinstance(outcome, RepositoryUnavailableError), outcome
    assert "durability barrier" in str(outcome)


def test_an_uncertain_add_settles_as_the_durable_schedule_once(
    sync_primary: tuple[ThrowawayCluster, ThrowawayCluster, Ql3Database],
) -> None:
    """Once commits are acknowledged cleanly, the uncertain add returns the one durable row."""
    primary, standby, database = sync_primary
    standby.stop()
    results: list[Any] = []
    with ScheduleAdmin(database.dsn("admin"), durability_timeout_ms=20_000) as admin:
        thread = _add_in_thread(admin, results)
        _cancel_the_wait(primary)
        # Whether the settling barrier already waits or not, it is acknowledged cleanly once
        # commits no longer need a standby.
        drop_standby_requirement(primary)
        thread.join(30)
        assert not thread.is_alive()
        (record,) = results
        assert not isinstance(record, Exception), record
        assert record == admin.get_schedule("nightly")
    assert fetch(database.superuser_dsn, _COUNTS) == [(1, 1)]
