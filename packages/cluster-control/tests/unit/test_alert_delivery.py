"""Alert settings from flags and files, and one alert's delivery (no database needed).

The command runs for real (/bin/sh) and the webhook is a real local HTTP server on a free port:
what a receiver sees (the JSON body, the `Idempotency-Key` header, the `QL3_ALERT_*` variables)
is read back, and failures (exit code, HTTP 500, a timeout) come back as errors.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from ql3_cluster_control._alert_keys import alert_settings, entry_alerts
from ql3_cluster_control._config import ConfigurationError
from ql3_cluster_control.worker._alert_delivery import alert_environment, deliver_alert
from ql3_cluster_postgres import TakenAlert

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


def _alert(**changes: Any) -> TakenAlert:
    fields: dict[str, Any] = {
        "alert_id": 41,
        "kind": "missed",
        "schedule_id": 3,
        "schedule_name": "nightly",
        "subject_key": 1_700_000_060_000,
        "run_id": None,
        "occurrence_ms": 1_700_000_060_000,
        "detail": {"occurrence_ms": 1_700_000_060_000},
        "raised_at_ms": 1_700_000_200_000,
        "command": None,
        "webhook": None,
        "attempt_number": 2,
        "taken_at_ms": 1_700_000_201_000,
    }
    fields.update(changes)
    return TakenAlert.model_validate(fields)


class _Receiver(BaseHTTPRequestHandler):
    """Answers each POST with the next status of `statuses`, recording what it received."""

    statuses: ClassVar[list[int]] = []
    received: ClassVar[list[tuple[dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), json.loads(body)))
        self.send_response(type(self).statuses.pop(0))
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep the test output quiet."""


@pytest.fixture
def receiver() -> Iterator[str]:
    """Serve `_Receiver` on a free loopback port; yield its URL."""
    _Receiver.statuses, _Receiver.received = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_settings_read_flags_and_file_keys_one_way() -> None:
    """Kinds from a comma list or a list, a deadline as a duration or milliseconds."""
    flags = alert_settings("missed, late", "notify.sh", None, "15m")
    assert flags is not None
    assert (flags.alert_on, flags.command, flags.deadline_ms) == (
        ("missed", "late"),
        "notify.sh",
        900_000,
    )
    entry = entry_alerts({"alert_on": ["failed"], "alert_webhook": "https://ops.example/h"})
    assert entry is not None
    assert (entry.alert_on, entry.webhook) == (("failed",), "https://ops.example/h")
    assert entry_alerts({"name": "x"}) is None


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        ({"alert_on": "missed,sometimes"}, "alert_on: unknown kind 'sometimes'"),
        ({"alert_on": "late"}, "alert_deadline"),
        ({"alert_command": "x"}, "alert_on: required"),
        ({"alert_on": "failed", "alert_webhook": "ftp://x"}, "alert_webhook"),
        ({"alert_on": "late", "alert_deadline": "soon"}, "alert_deadline: a duration"),
        ({"alert_on": "late", "alert_deadline": 10}, "alert_deadline"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(keys: dict[str, object], named: str) -> None:
    """Each refusal names the key (or flag) and is raised before anything is written."""
    with pytest.raises(ConfigurationError, match=named):
        entry_alerts(keys)


def test_a_command_gets_the_alert_variables(tmp_path: Path) -> None:
    """The command sees QL3_ALERT_ID (the idempotency key) and the alert as JSON; exit 0."""
    out = tmp_path / "env.json"
    command = f'printf "%s|%s|%s" "$QL3_ALERT_ID" "$QL3_ALERT_KIND" "$QL3_ALERT_JSON" > {out}'
    assert deliver_alert(_alert(command=command)) is None
    alert_id, kind, body = out.read_text().split("|", 2)
    assert (alert_id, kind) == ("41", "missed")
    assert json.loads(body)["occurrence_ms"] == 1_700_000_060_000
    assert "QL3_WORKER_DSN" not in alert_environment(_alert())


def test_a_failing_or_hanging_command_is_a_failed_attempt() -> None:
    """Exit 3 and a timeout come back as errors naming what happened."""
    error = deliver_alert(_alert(command="echo broken; exit 3"))
    assert error is not None
    assert "exit code 3" in error
    assert "broken" in error
    slow = deliver_alert(_alert(command="sleep 30"), command_timeout_s=0.3)
    assert slow is not None
    assert "timed out" in slow


def test_a_webhook_gets_the_json_and_the_idempotency_key(receiver: str) -> None:
    """A 500 is a failed attempt; the retry carries the same key and body; a 200 delivers."""
    _Receiver.statuses = [500, 200]
    alert = _alert(webhook=receiver)
    first = deliver_alert(alert)
    assert first is not None
    assert "HTTP 500" in first
    assert deliver_alert(alert) is None
    (headers_1, body_1), (headers_2, body_2) = _Receiver.received
    assert headers_1["Idempotency-Key"] == headers_2["Idempotency-Key"] == "ql3-alert-41"
    assert body_1 == body_2
    assert (body_1["alert_id"], body_1["kind"], body_1["schedule"]) == (41, "missed", "nightly")


def test_both_channels_are_tried_and_both_errors_reported(receiver: str) -> None:
    """A failing command does not keep the webhook from being tried."""
    _Receiver.statuses = [503]
    error = deliver_alert(_alert(command="exit 1", webhook=receiver))
    assert error is not None
    assert "exit code 1" in error
    assert "HTTP 503" in error
    assert len(_Receiver.received) == 1
    assert deliver_alert(_alert()) is None  # no channel: recorded, counted, listed only


_NOWHERE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--alert-on", "late"], "--alert-deadline: `late` needs a deadline"),
        (["--alert-on", "missed,never"], "--alert-on: unknown kind 'never'"),
        (["--alert-webhook", "https://ops.example/h"], "--alert-on: required"),
        (["--alert-on", "failed", "--alert-webhook", "mailto:ops"], "--alert-webhook"),
        (["--alert-on", "late", "--alert-deadline", "tomorrow"], "--alert-deadline: a duration"),
    ],
)
def test_schedule_add_alert_flags_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """A bad alert flag is refused naming the flag, before any connection (port 1: none)."""
    line = usage_error(["schedule", "add", "job", "--cron", "* * * * *", *args, "--dsn", _NOWHERE])
    assert needle in line, line


def test_apply_file_alert_errors_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path
) -> None:
    """A schedule file's alert mistake names the schedule and the key."""
    path = tmp_path / "s.toml"
    path.write_text('[[schedule]]\nname = "w"\ncron = "* * * * *"\nalert_on = ["late"]\n')
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert "schedule 'w'" in line, line
    assert "alert_deadline" in line, line
