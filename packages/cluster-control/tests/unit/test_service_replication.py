"""The replication-safety guard and the reconnect policy of the service (fake store, no sockets)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fake_repository import FakeRepository
from fake_rows import fake_node
from fix_db import wait_for
from ql3_cluster_control import (
    CoordinatorMetrics,
    CoordinatorService,
    HealthState,
    load_settings,
    metrics_wsgi_app,
)
from ql3_runtime_core import RepositoryUnavailableError

_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_UNSAFE = {"standbys": 1, "synchronous_standby_names": "", "commits_wait_for_standby": False}


def _healthz(app: _App) -> tuple[str, str]:
    seen: list[str] = []
    body = b"".join(app({"PATH_INFO": "/healthz"}, lambda status, _headers: seen.append(status)))
    return seen[0], body.decode()


@dataclass
class _Flaky(FakeRepository):
    """A fake whose next idle hint fails once when asked, as a lost connection would."""

    fail_next_hint: bool = False

    def next_due_in_ms(self) -> int | None:
        if self.fail_next_hint:
            self.fail_next_hint = False
            msg = "connection lost"
            raise RepositoryUnavailableError(msg)
        return super().next_due_in_ms()


class _Running:
    def __init__(self, repo: FakeRepository) -> None:
        settings = load_settings(owner_id="replica-r", poll_interval_ms=20, retry_fast_ms=20)
        self.service = CoordinatorService(settings, repository_factory=lambda: repo)
        self.thread = threading.Thread(target=self.service.run, daemon=True)

    def sample(self, name: str) -> float:
        return self.service.metrics.registry.get_sample_value(name) or 0.0


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


def test_a_standby_is_never_claimed_on_and_retried_soon(
    running: Callable[[FakeRepository], _Running], caplog: pytest.LogCaptureFixture
) -> None:
    """Connected to a node in recovery, the service claims nothing and retries soon."""
    repo = FakeRepository(replication=fake_node(in_recovery=True))
    repo.add(first_due_ms=repo.now_ms)
    with caplog.at_level(logging.WARNING, logger="ql3_cluster_control"):
        replica = running(repo)
        wait_for(lambda: replica.sample("ql3_database_faults_total") >= 5, timeout_s=10, what="5")
    faults = [r for r in caplog.records if getattr(r, "event", "") == "service.fault"]
    assert faults
    assert all(r.error == "NoWritableServerError" and r.leader_changing for r in faults)  # type: ignore[attr-defined]
    assert all(r.retry_in_ms <= 20 for r in faults)  # type: ignore[attr-defined]
    assert "is in recovery" in faults[0].reason  # type: ignore[attr-defined]
    assert not replica.service.health.connected
    assert repo.runs == []
    assert not any(call.startswith("claim") for call in repo.calls)


def test_unsafe_replication_is_a_gauge_a_warning_and_healthz_detail(
    running: Callable[[FakeRepository], _Running], caplog: pytest.LogCaptureFixture
) -> None:
    """Standbys without a synchronous one: gauge 1, one WARNING, /healthz 200 naming it."""
    repo = FakeRepository(replication=fake_node(**_UNSAFE))
    with caplog.at_level(logging.INFO, logger="ql3_cluster_control"):
        replica = running(repo)
        wait_for(lambda: replica.service.health.healthy, timeout_s=10, what="connected")
        wait_for(lambda: replica.sample("ql3_replication_unsafe") == 1, timeout_s=10, what="1")
        status, body = _healthz(metrics_wsgi_app(CoordinatorMetrics(), replica.service.health))
        assert status == "200 OK"
        assert body.startswith("ok; replication: unsafe (asynchronous: 1 standby stream")
        repo.replication = fake_node(**{**_UNSAFE, "commits_wait_for_standby": True})
        wait_for(lambda: replica.sample("ql3_replication_unsafe") == 0, timeout_s=15, what="0")
    events = [getattr(record, "event", "") for record in caplog.records]
    assert events.count("replication.unsafe") == 1
    assert events.count("replication.safe") == 1


def test_another_timeline_after_a_reconnect_is_a_counted_failover(
    running: Callable[[FakeRepository], _Running], caplog: pytest.LogCaptureFixture
) -> None:
    """Reconnecting to timeline 2 of the same system logs and counts one failover."""
    repo = _Flaky()
    with caplog.at_level(logging.WARNING, logger="ql3_cluster_control"):
        replica = running(repo)
        wait_for(lambda: replica.sample("ql3_database_timeline") == 1, timeout_s=10, what="tl 1")
        assert replica.sample("ql3_failovers_total") == 0
        repo.replication = fake_node(timeline=2)
        repo.fail_next_hint = True
        wait_for(lambda: replica.sample("ql3_failovers_total") == 1, timeout_s=10, what="failover")
        assert replica.sample("ql3_database_timeline") == 2
    (warning,) = [r for r in caplog.records if getattr(r, "event", "") == "replication.failover"]
    assert warning.timeline == 2  # type: ignore[attr-defined]
    assert warning.previous_system_identifier == "7000000000000000001"  # type: ignore[attr-defined]
    assert warning.previous_timeline == 1  # type: ignore[attr-defined]


def test_healthz_without_unsafe_replication_stays_plain_ok() -> None:
    """A safe or unknown replication state adds nothing to the plain `ok`."""
    health = HealthState(connected=True, schema_ok=True, replication=fake_node(standbys=0))
    assert _healthz(metrics_wsgi_app(CoordinatorMetrics(), health)) == ("200 OK", "ok\n")
