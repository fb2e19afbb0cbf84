"""The replication-safety guard on a real primary, streaming standbys and a promotion (DESIGN §13).

One Coordinator service runs in-process against a multi-host DSN (the primary, then its first
standby; `target_session_attrs=read-write`), the way operators point replicas at an HA cluster.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator  # noqa: TC003  # fixture signature

import pytest
from fix_db import run_ql3, sql_rows, wait_for
from history import add_schedules
from ql3_cluster_control import CoordinatorService, load_settings
from ql3_testkit import ThrowawayCluster, prepare_ql3_database


@pytest.fixture
def primary() -> Iterator[ThrowawayCluster]:
    """Yield a primary of its own (its standbys stop with it)."""
    with ThrowawayCluster(name="ql3guard") as cluster:
        yield cluster


def _runs(dsn: str) -> int:
    return int(sql_rows(dsn, "SELECT count(*) FROM ql3.runs")[0][0])


def test_unsafe_then_safe_then_a_promotion_counted_as_a_failover(
    primary: ThrowawayCluster,
) -> None:
    """Async standby: unsafe; sync one: safe; promotion: one failover, timeline 2, admits again."""
    db = prepare_ql3_database(primary, "guard")
    standby = primary.create_standby()
    hosts = {
        "host": "127.0.0.1,127.0.0.1",
        "port": f"{primary.port},{standby.port}",
        "target_session_attrs": "read-write",
    }
    add_schedules(db.dsn("admin"), 1)
    settings = load_settings(
        dsn=db.dsn("runtime", **hosts), owner_id="guarded", lease_ms=2_000, retry_fast_ms=50
    )
    service = CoordinatorService(settings)
    worker = threading.Thread(target=service.run)
    worker.start()

    def sample(name: str) -> float:
        return service.metrics.registry.get_sample_value(name) or 0.0

    try:
        wait_for(lambda: service.health.healthy, timeout_s=20, what="connected")
        wait_for(lambda: sample("ql3_replication_unsafe") == 1, timeout_s=10, what="unsafe")
        assert "replication: unsafe (asynchronous" in service.health.describe()
        status = json.loads(run_ql3("status", "--json", "--dsn", db.dsn("admin")).stdout)
        replication = status["replication"]
        assert (replication["mode"], replication["unsafe"]) == ("asynchronous", True)
        assert (replication["port"], replication["timeline"]) == (primary.port, 1)
        primary.create_standby(synchronous=True)
        wait_for(lambda: sample("ql3_replication_unsafe") == 0, timeout_s=20, what="safe")
        wait_for(lambda: _runs(db.superuser_dsn) > 0, timeout_s=20, what="admissions")
        primary.fence()
        standby.promote()
        new_superuser = standby.dsn(db.name)  # history is read on the new primary
        admitted = _runs(new_superuser)
        wait_for(lambda: sample("ql3_failovers_total") == 1, timeout_s=30, what="failover")
        assert sample("ql3_database_timeline") == 2
        wait_for(lambda: _runs(new_superuser) > admitted, timeout_s=20, what="admissions after it")
        assert service.health.replication is not None
        assert service.health.replication.port == standby.port
    finally:
        service.request_stop()
        worker.join(20)
    assert not worker.is_alive()
    duplicates = sql_rows(
        new_superuser,
        "SELECT count(*) FROM (SELECT 1 FROM ql3.runs GROUP BY schedule_id, scheduled_for_ms"
        " HAVING count(*) > 1) AS d",
    )
    assert duplicates[0][0] == 0
