"""Worker parts without a database: settings, output tails, a command's environment, metrics."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fake_attempts import run_command, taken_attempt
from ql3_cluster_control import (
    ConfigurationError,
    HealthState,
    WorkerMetrics,
    load_worker_settings,
    metrics_wsgi_app,
)
from ql3_cluster_control._config import WORKER_LEASE_MS_MIN
from ql3_cluster_control.worker._attempt_runner import KILL_GRACE_S, KILL_MARGIN_S, CommandRunner
from ql3_cluster_control.worker._command_output import _Tail, output_tail
from ql3_runtime_core import (
    ATTEMPT_KILL_MARGIN_MS,
    ATTEMPT_SUCCESSOR_GRACE_MS,
    AttemptOutcome,
)


@pytest.fixture(autouse=True)
def _no_ql3_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("QL3_"):
            monkeypatch.delenv(key)


def test_worker_defaults_and_where_the_dsn_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults are 4 slots, a 30 s lease, a 30 s grace; QL3_WORKER_DSN beats QL3_DSN."""
    settings = load_worker_settings()
    assert (settings.concurrency, settings.lease_ms, settings.grace_ms) == (4, 30_000, 30_000)
    assert settings.dsn is None
    monkeypatch.setenv("QL3_DSN", "host=shared")
    assert load_worker_settings().dsn_value() == "host=shared"
    monkeypatch.setenv("QL3_WORKER_DSN", "host=worker")
    assert load_worker_settings().dsn_value() == "host=worker"
    assert load_worker_settings(dsn="host=flag").dsn_value() == "host=flag"
    monkeypatch.setenv("QL3_WORKER_CONCURRENCY", "7")
    assert load_worker_settings().concurrency == 7


def test_output_tail_keeps_the_last_bytes_as_text() -> None:
    """The tail is the last bytes; broken UTF-8 and NUL become U+FFFD, never an error."""
    assert output_tail(b"abcdef", 3) == "def"
    assert output_tail(b"ok \xff\x00", 10) == "ok \ufffd\ufffd"
    assert output_tail("é".encode() * 3, 3) == "\ufffdé"  # the cut fell inside a character
    tail = _Tail(limit=5)
    for chunk in (b"12", b"345", b"6789"):
        tail.feed(chunk)
    assert tail.text() == "56789"


def test_a_command_sees_its_run_and_not_the_worker_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's QL3_* variables are set; the worker's own (its DSN) are not passed on."""
    monkeypatch.setenv("QL3_WORKER_DSN", "host=secret password=hunter2")
    monkeypatch.setenv("QL3_DSN", "host=secret")
    monkeypatch.setenv("PATH_FOR_TEST", "kept")
    runner = CommandRunner(
        taken_attempt("true"),
        worker_id="w",
        record=lambda *_: None,
        on_done=lambda: None,
        confirmed_at=0,
        lease_s=30,
    )
    env = runner.environment()
    assert {key: value for key, value in env.items() if key.startswith("QL3_")} == {
        "QL3_RUN_ID": "7",
        "QL3_ATTEMPT": "2",
        "QL3_SCHEDULED_FOR_MS": "1700000000000",
        "QL3_SCHEDULE": "nightly backup",
        "QL3_TASK_PAYLOAD": '{"a":[1,2],"b":1}',
    }
    assert env["PATH_FOR_TEST"] == "kept"


def _get(app: object, path: str) -> tuple[str, str]:
    status: list[str] = []
    body = b"".join(
        app({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda s, _h: status.append(s))  # type: ignore[operator]
    )
    return status[0], body.decode()


def test_worker_metrics_and_health_are_served() -> None:
    """Every outcome series exists from the start; /healthz follows connection and schema."""
    metrics, health = WorkerMetrics(), HealthState()
    metrics.observe_outcome("failed")
    metrics.observe_taken(1_500)
    app = metrics_wsgi_app(metrics, health)
    status, text = _get(app, "/metrics")
    assert status.startswith("200")
    assert 'ql3_worker_attempts_total{outcome="succeeded"} 0.0' in text
    assert 'ql3_worker_attempts_total{outcome="failed"} 1.0' in text
    assert "ql3_worker_running 0.0" in text
    assert 'ql3_attempt_queue_delay_seconds_bucket{le="2.5"} 1.0' in text
    assert _get(app, "/healthz")[0].startswith("503")
    health.connected = health.schema_ok = True
    assert _get(app, "/healthz") == ("200 OK", "ok\n")


def test_a_worker_lease_must_leave_room_before_the_kill_margin() -> None:
    """A lease shorter than the kill margin + 2 s is refused by name; 5 s is the least."""
    assert WORKER_LEASE_MS_MIN == ATTEMPT_KILL_MARGIN_MS + 2_000
    assert load_worker_settings(lease_ms=WORKER_LEASE_MS_MIN).lease_ms == WORKER_LEASE_MS_MIN
    with pytest.raises(ConfigurationError, match=f"lease_ms={WORKER_LEASE_MS_MIN - 1}"):
        load_worker_settings(lease_ms=WORKER_LEASE_MS_MIN - 1)


def _runner(command: str, *, lease_s: float, confirmed_at: float) -> CommandRunner:
    return CommandRunner(
        taken_attempt(command),
        worker_id="w",
        record=lambda *_: None,
        on_done=lambda: None,
        confirmed_at=confirmed_at,
        lease_s=lease_s,
    )


def test_the_kill_point_is_the_margin_before_the_lease_counted_from_the_send() -> None:
    """kill_at = last confirmed send + lease - 3 s; a confirmation never moves it back."""
    runner = _runner("true", lease_s=30, confirmed_at=100.0)
    assert KILL_MARGIN_S * 1000 == ATTEMPT_KILL_MARGIN_MS
    assert runner.kill_at == 100.0 + 30 - KILL_MARGIN_S
    runner.confirm(110.0)
    runner.confirm(105.0)  # an older statement's answer arriving late
    assert runner.kill_at == 110.0 + 30 - KILL_MARGIN_S
    # SIGKILL goes out KILL_GRACE_S after SIGTERM: still a second before the lease can end.
    assert KILL_MARGIN_S - KILL_GRACE_S >= 1.0
    assert ATTEMPT_SUCCESSOR_GRACE_MS >= ATTEMPT_KILL_MARGIN_MS


def test_an_unconfirmed_command_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    """Past its kill point the group gets SIGTERM, then SIGKILL; lost, nothing recorded."""
    pid_file = tmp_path / "shell.pid"
    recorded: list[object] = []
    runner = CommandRunner(
        taken_attempt(f"trap '' TERM; echo $$ > {pid_file}; while :; do sleep 0.1; done"),
        worker_id="w",
        record=lambda *args: recorded.append(args),
        on_done=lambda: None,
        confirmed_at=time.monotonic(),
        lease_s=WORKER_LEASE_MS_MIN / 1000,
    )
    runner.start()
    assert runner.done.wait(60), "the runner never ended its command"
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert (runner.outcome, recorded) == ("lost", [])
    assert runner.lost_reason == (
        "no heartbeat confirmed its lease for 2000 ms (lease 5000 ms, kill margin 3000 ms)"
    )


def test_output_held_open_by_an_escaped_grandchild_does_not_hold_the_runner() -> None:
    """A grandchild that left the group keeps the pipe open: the end is recorded anyway.

    The shell prints, starts `sleep 8` in a session of its own (out of reach of the group's
    SIGKILL, its output still the pipe) and exits 0. The runner records the success with what
    was read after at most its reader's grace (1 s), well before the grandchild ends (8 s).
    """
    attempt = taken_attempt("echo before; setsid sleep 8 & echo after")
    result = run_command(attempt, lease_s=30, within_s=5)  # the grandchild lives 8 s
    assert (result.outcome, result.exit_code) == (AttemptOutcome.SUCCEEDED, 0)
    assert "before" in (result.output_tail or "")
