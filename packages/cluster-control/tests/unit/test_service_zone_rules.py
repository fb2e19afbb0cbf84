"""The service while it cannot load the recorded zone rules: health, gauges (fake store)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from fake_repository import FakeRepository
from fix_db import wait_for
from ql3_cluster_control import (
    CoordinatorMetrics,
    CoordinatorService,
    HealthState,
    load_settings,
    metrics_wsgi_app,
)
from ql3_runtime_core import ScheduleState, ZoneRulesCheck

_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _healthz(app: _App) -> tuple[str, str]:
    seen: list[str] = []
    body = b"".join(app({"PATH_INFO": "/healthz"}, lambda status, _headers: seen.append(status)))
    return seen[0], body.decode()


def test_healthz_names_both_versions_while_the_recorded_rules_cannot_be_loaded() -> None:
    """A replica that cannot load the recorded rules answers 503 naming both versions and why."""
    health = HealthState(connected=True, schema_ok=True)
    app = metrics_wsgi_app(CoordinatorMetrics(), health)
    health.zone_rules = ZoneRulesCheck(
        local_version="2026.1",
        recorded_version="1999z",
        problem="the database holds no rule data for tzdata 1999z",
    )
    status, body = _healthz(app)
    assert status.startswith("503")
    assert "this replica decides with 2026.1" in body
    assert "the database records tzdata 1999z" in body
    assert "no rule data for tzdata 1999z" in body
    health.zone_rules = ZoneRulesCheck(local_version="2026.1", recorded_version=None)
    assert "records tzdata none" in _healthz(app)[1]
    health.zone_rules = ZoneRulesCheck(local_version="2026.1", recorded_version="2026.1")
    assert _healthz(app) == ("200 OK", "ok\n")


class _Running:
    """A CoordinatorService on the fake store, run in a thread until the test ends."""

    def __init__(self, repo: FakeRepository) -> None:
        settings = load_settings(owner_id="replica-z", poll_interval_ms=20)
        self.repo = repo
        self.service = CoordinatorService(settings, repository_factory=lambda: repo)
        self.thread = threading.Thread(target=self.service.run, daemon=True)

    def sample(self, name: str) -> float | None:
        return self.service.metrics.registry.get_sample_value(name)


@pytest.fixture
def running() -> Iterator[Callable[[FakeRepository], _Running]]:
    """Start services on given fake stores; stop them all at the end."""
    started: list[_Running] = []

    def start(repo: FakeRepository) -> _Running:
        item = _Running(repo)
        started.append(item)
        item.thread.start()
        return item

    yield start
    for item in started:
        item.service.request_stop()
        item.thread.join(10)
        assert not item.thread.is_alive()


def test_a_replica_without_the_recorded_rules_stays_up_and_resumes_once_it_loads_them(
    running: Callable[[FakeRepository], _Running], caplog: pytest.LogCaptureFixture
) -> None:
    """Claims nothing, 503 and gauge 1, one WARNING; once the data is there it claims again."""
    repo = FakeRepository(zone_rules_recorded="1999z")
    repo.add(first_due_ms=repo.now_ms)
    with caplog.at_level(logging.INFO, logger="ql3_cluster_control"):
        replica = running(repo)
        wait_for(
            lambda: (replica.sample("ql3_cycles_total") or 0) >= 5,
            timeout_s=10,
            what="several refused cycles",
        )
        assert replica.sample("ql3_zone_rules_mismatch") == 1
        assert not replica.service.health.healthy
        assert "1999z" in replica.service.health.describe()
        assert repo.runs == []
        repo.zone_rules_stored.add("1999z")  # `ql3 migrate` from a node with 1999z
        wait_for(lambda: bool(repo.runs), timeout_s=10, what="an admission after adopt")
        wait_for(lambda: replica.service.health.healthy, timeout_s=10, what="healthy again")
        assert replica.sample("ql3_zone_rules_mismatch") == 0
    events = [getattr(record, "event", "") for record in caplog.records]
    assert events.count("zone_rules.mismatch") == 1
    assert events.count("zone_rules.loaded") == 1
    (warning,) = [r for r in caplog.records if getattr(r, "event", "") == "zone_rules.mismatch"]
    assert warning.levelno == logging.WARNING


def test_invalid_gauge_reads_the_database_at_connect(
    running: Callable[[FakeRepository], _Running],
) -> None:
    """ql3_schedules_invalid shows quarantined rows as soon as the replica connects."""
    repo = FakeRepository()
    for _ in range(2):
        repo.add().state = ScheduleState.INVALID
    replica = running(repo)
    wait_for(
        lambda: replica.sample("ql3_schedules_invalid") == 2, timeout_s=10, what="invalid gauge"
    )
    assert repo.calls.count("cluster_state") >= 1
