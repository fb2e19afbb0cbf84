"""Log rendering (text and JSON) and the metrics/health WSGI app, without sockets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator  # noqa: TC003  # pytest resolves fixture annotations
from typing import Any
from uuid import UUID

import pytest
from ql3_cluster_control import (
    CoordinatorMetrics,
    HealthState,
    LogFormat,
    configure_logging,
    metrics_wsgi_app,
)
from ql3_runtime_core import AdmittedRun, log_event, summarize_cycle


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    """Put the root logger's handlers and level back after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_json_log_line_carries_event_fields_and_owner() -> None:
    """With the JSON format, one log call is one JSON object with the extra fields and owner id."""
    stream = io.StringIO()
    configure_logging(LogFormat.JSON, owner_id="replica-x", stream=stream)
    logging.getLogger("ql3.test").info(
        "cycle", extra={"event": "cycle.summary", "first_claim_acquired_at_ms": 5}
    )
    record = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert record["event"] == "cycle.summary"
    assert record["first_claim_acquired_at_ms"] == 5
    assert record["owner_id"] == "replica-x"
    assert record["level"] == "INFO"
    assert "asctime" not in record
    assert "created" not in record


@pytest.mark.usefixtures("restore_root_logger")
def test_text_log_line_has_key_values_and_no_node_timestamp() -> None:
    """The text format renders `LEVEL logger: event key=value` without a node timestamp."""
    stream = io.StringIO()
    configure_logging(LogFormat.TEXT, stream=stream)
    log_event(logging.getLogger("ql3.test"), logging.WARNING, "service.fault", attempt=2)
    line = stream.getvalue().strip().splitlines()[-1]
    assert line == "WARNING ql3.test: service.fault attempt=2"


def _call(app: Any, path: str) -> tuple[str, bytes]:
    seen: dict[str, str] = {}

    def start_response(status: str, _headers: list[tuple[str, str]]) -> None:
        seen["status"] = status

    body = b"".join(
        app({"PATH_INFO": path, "REQUEST_METHOD": "GET", "QUERY_STRING": ""}, start_response)
    )
    return seen["status"], body


def test_healthz_is_503_until_connected_with_matching_schema() -> None:
    """/healthz answers 503 while disconnected or mismatched and 200 when healthy."""
    health = HealthState()
    app = metrics_wsgi_app(CoordinatorMetrics(), health)
    assert _call(app, "/healthz")[0].startswith("503")
    health.connected = True
    assert _call(app, "/healthz")[0].startswith("503")
    health.schema_ok = True
    assert _call(app, "/healthz")[0].startswith("200")
    assert _call(app, "/nope")[0].startswith("404")


def test_metrics_expose_counters_and_database_time_lateness() -> None:
    """/metrics shows cycles, claims, admissions and lateness measured in database time."""
    metrics = CoordinatorMetrics()
    metrics.observe_cycle(summarize_cycle("o", [], []), 0.01)
    run = AdmittedRun(
        run_id=1,
        attempt_id=1,
        schedule_id=1,
        task_id=1,
        scheduled_for_ms=1_000,
        created_at_ms=1_250,
        owner_id="o",
        claim_token=UUID(int=1),
    )
    metrics.observe_admissions([run])
    status, body = _call(metrics_wsgi_app(metrics, HealthState()), "/metrics")
    text = body.decode()
    assert status.startswith("200")
    for name in (
        "ql3_cycles_total 1.0",
        "ql3_admissions_total 1.0",
        "ql3_claims_held",
        "ql3_clock_regressions_total",
        "ql3_serialization_retries_total",
        "ql3_cycle_duration_seconds_count 1.0",
        'ql3_admission_lateness_seconds_bucket{le="0.25"} 1.0',
    ):
        assert name in text
