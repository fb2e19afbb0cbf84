"""Coordinator settings: defaults, bounds, QL3_* environment, and the rule-zero clock refusal."""

from __future__ import annotations

import os
import socket

import pytest
from pydantic import ValidationError
from ql3_cluster_control import (
    ConfigurationError,
    CoordinatorSettings,
    LogFormat,
    check_environment,
    load_settings,
)


@pytest.fixture(autouse=True)
def _no_ql3_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("QL3_"):
            monkeypatch.delenv(key)


def test_defaults_match_the_decision_record() -> None:
    """Lease 30 s, batch 128, budget 256, text logs and seconds-scale keepalives by default."""
    settings = load_settings()
    assert settings.lease_ms == 30_000
    assert settings.claim_batch == 128
    assert settings.cycle_budget == 256
    assert settings.log_format is LogFormat.TEXT
    assert settings.dsn is None
    assert settings.keepalives_idle_s <= 10
    assert settings.tcp_user_timeout_ms <= 30_000


def test_default_owner_id_is_host_pid_and_random_suffix() -> None:
    """Two default owner ids differ, and each names the host and the process."""
    first, second = load_settings().owner_id, load_settings().owner_id
    assert first != second
    assert first.startswith(f"{socket.gethostname()}-{os.getpid()}-")


def test_clock_in_environment_is_refused_naming_rule_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """QL3_CLOCK is refused with a message naming rule zero."""
    monkeypatch.setenv("QL3_CLOCK", "system")
    with pytest.raises(ConfigurationError, match=r"QL3_CLOCK.*rule zero"):
        load_settings()
    with pytest.raises(ValidationError, match="rule zero"):
        CoordinatorSettings()


def test_clock_flag_is_refused_naming_rule_zero() -> None:
    """A clock given as a flag (init keyword) is refused with a message naming rule zero."""
    with pytest.raises(ConfigurationError, match=r"--clock.*rule zero"):
        load_settings(clock="node")
    with pytest.raises(ValidationError, match="rule zero"):
        CoordinatorSettings(clock="node")  # type: ignore[call-arg]


def test_unknown_ql3_variable_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt QL3_* variable is named in the error instead of being ignored."""
    monkeypatch.setenv("QL3_LEASE_SECONDS", "30")
    with pytest.raises(ConfigurationError, match="QL3_LEASE_SECONDS: unknown QL3 setting"):
        load_settings()


def test_check_environment_accepts_every_setting_name() -> None:
    """Every setting's QL3_ name passes the environment check."""
    environ = {f"QL3_{name.upper()}": "x" for name in CoordinatorSettings.model_fields}
    check_environment(environ)


def test_environment_is_read_and_flags_outrank_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """QL3_LEASE_MS is read from the environment; a flag value wins over it."""
    monkeypatch.setenv("QL3_LEASE_MS", "5000")
    monkeypatch.setenv("QL3_CLAIM_BATCH", "4")
    settings = load_settings(claim_batch=8)
    assert settings.lease_ms == 5_000
    assert settings.claim_batch == 8


@pytest.mark.parametrize("value", [999, 60_001])
def test_lease_outside_bounds_is_refused_naming_the_value(value: int) -> None:
    """A lease outside 1 000..60 000 ms is refused with the field and the value in the message."""
    with pytest.raises(ConfigurationError, match=rf"lease_ms={value}"):
        load_settings(lease_ms=value)


def test_bad_log_format_and_backoff_bounds_are_refused() -> None:
    """An unknown log format and a max backoff below the initial one are configuration errors."""
    with pytest.raises(ConfigurationError, match="log_format='xml'"):
        load_settings(log_format="xml")
    with pytest.raises(ConfigurationError, match="retry_max_ms=10"):
        load_settings(retry_initial_ms=100, retry_max_ms=10)


def test_malformed_dsn_is_refused_without_echoing_it() -> None:
    """A malformed DSN fails before connecting, and the password is not printed."""
    with pytest.raises(ConfigurationError, match=r"dsn=\*\*\*") as caught:
        load_settings(dsn="host=x password=hunter2 = =")
    assert "hunter2" not in str(caught.value)


def test_settings_are_frozen() -> None:
    """Settings cannot change after validation."""
    settings = load_settings()
    with pytest.raises(ValidationError):
        settings.lease_ms = 2_000  # type: ignore[misc]
