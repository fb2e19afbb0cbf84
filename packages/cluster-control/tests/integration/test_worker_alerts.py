"""Workers record `missed` with every Coordinator stopped, and deliver it at least once.

No Coordinator runs at all: the database clock (libfaketime, `faketime_db`) is moved past the
occurrence's bound, and two real `Worker`s (on threads of the test, as role
`ql3_worker_ingress`) race to record it. The schedule's webhook is a local HTTP server that
answers 500 first, then 200; its command fails first, then succeeds. What the database holds
afterwards (one alert, two delivery attempts by database time) and what the receivers saw (the
same idempotency key twice) is read back.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
import pytest
from fix_db import db_now_ms, wait_for
from psycopg.rows import dict_row
from ql3_cluster_control import Worker, WorkerSettings
from ql3_cluster_postgres import ALERT_MISSED_MARGIN_MS, AlertSettings, ScheduleAdmin
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from ql3_testkit import Ql3Database, ThrowawayCluster


class _Receiver(BaseHTTPRequestHandler):
    """Answers 500 to the first POST and 200 afterwards, recording each key and body."""

    received: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append((self.headers["Idempotency-Key"], body))
        self.send_response(500 if len(type(self).received) == 1 else 200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep the test output quiet."""


@pytest.fixture
def receiver() -> Iterator[str]:
    """Serve `_Receiver` on a free loopback port; yield its URL."""
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/alert"
    finally:
        server.shutdown()
        server.server_close()


def _rows(db: Ql3Database, statement: str) -> list[dict[str, Any]]:
    with (
        psycopg.connect(db.dsn("owner"), autocommit=True) as conn,
        conn.cursor(row_factory=dict_row) as cur,
    ):
        return cur.execute(statement).fetchall()


def test_missed_with_every_coordinator_stopped_is_recorded_once_and_delivered(
    faketime_db: Ql3Database,
    faketime_cluster: ThrowawayCluster,
    receiver: str,
    tmp_path: Path,
) -> None:
    """Two workers, no Coordinator: one alert, a failed then a delivered attempt, one key."""
    marker = tmp_path / "calls"
    # Fails on its first call (no marker yet), succeeds on the next: a command retried.
    command = f'echo "$QL3_ALERT_ID" >> {marker}; test "$(wc -l < {marker})" -ge 2'
    alerts = AlertSettings(alert_on=("missed",), command=command, webhook=receiver)
    # One occurrence only (its window is one second, two seconds ahead): one alert, however
    # far the clock moves; `missed` is one alert per occurrence (`test_coordinator_alerts`).
    now = db_now_ms(faketime_db.superuser_dsn)
    only = (now // 1000 + 2) * 1000
    definition = ScheduleDefinition(
        cron="* * * * * *",
        misfire_policy=MisfirePolicy.FIRE_ONCE,
        misfire_grace_ms=0,
        start_at_ms=only,
        end_at_ms=only,
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        record = admin.add_schedule("watched", definition, alerts=alerts)
    assert record.next_due_at_ms == only
    faketime_cluster.set_clock_offset_ms(only - now + ALERT_MISSED_MARGIN_MS + 5_000)

    workers = [
        Worker(
            WorkerSettings(dsn=faketime_db.dsn("worker_ingress"), id=f"w{i}", poll_interval_ms=50)
        )
        for i in range(2)
    ]
    threads = [threading.Thread(target=worker.run, daemon=True) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        wait_for(
            lambda: (
                [r["delivery_state"] for r in _rows(faketime_db, "SELECT * FROM ql3.alerts")]
                == ["delivered"]
            ),
            timeout_s=30,
            what="the missed alert delivered",
        )
    finally:
        for worker in workers:
            worker.request_stop()
        for thread in threads:
            thread.join(timeout=30)
    (alert,) = _rows(faketime_db, "SELECT * FROM ql3.alerts")
    assert (alert["kind"], alert["occurrence_ms"]) == ("missed", record.next_due_at_ms)
    deliveries = _rows(
        faketime_db,
        "SELECT attempt_number, outcome, error, finished_at_ms FROM ql3.alert_deliveries"
        " ORDER BY attempt_number",
    )
    assert [(d["attempt_number"], d["outcome"]) for d in deliveries] == [
        (1, "failed"),
        (2, "delivered"),
    ]
    assert "HTTP 500" in deliveries[0]["error"]
    assert "exit code 1" in deliveries[0]["error"]
    # Retried after the database's backoff (1 s), never before.
    assert deliveries[1]["finished_at_ms"] - deliveries[0]["finished_at_ms"] >= 1_000
    keys = {key for key, _ in _Receiver.received}
    assert keys == {f"ql3-alert-{alert['id']}"}
    assert len(_Receiver.received) == 2
    assert marker.read_text().split() == [str(alert["id"])] * 2
    assert all(body["kind"] == "missed" for _, body in _Receiver.received)
    # Each alert is counted once over the workers (by the one that first took it).
    counted = sum(
        worker.metrics.registry.get_sample_value("ql3_alerts_total", {"kind": "missed"}) or 0
        for worker in workers
    )
    assert counted == 1
