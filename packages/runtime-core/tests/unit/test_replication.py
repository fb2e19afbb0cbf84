"""The replication reading: its mode, its safety verdict and what counts as a failover."""

from __future__ import annotations

from typing import Any

import pytest
from ql3_runtime_core import ReplicationMode, ReplicationState


def _state(**changes: Any) -> ReplicationState:
    fields: dict[str, Any] = {
        "host": "10.0.0.5",
        "port": 5432,
        "system_identifier": "7715141092302373142",
        "timeline": 1,
        "in_recovery": False,
        "standbys": 1,
        "commits_wait_for_standby": False,
        "synchronous_standby_names": "",
        "synchronous_commit": "on",
    }
    fields.update(changes)
    return ReplicationState(**fields)


@pytest.mark.parametrize(
    ("changes", "mode", "unsafe"),
    [
        ({"in_recovery": True}, ReplicationMode.STANDBY, False),
        ({"standbys": 0}, ReplicationMode.NONE, False),
        ({"commits_wait_for_standby": True}, ReplicationMode.SYNCHRONOUS, False),
        ({}, ReplicationMode.ASYNCHRONOUS, True),
    ],
)
def test_mode_and_safety_follow_standbys_and_waiting(
    changes: dict[str, Any],
    mode: ReplicationMode,
    unsafe: bool,  # noqa: FBT001
) -> None:
    """Only a primary streaming to standbys without waiting for a synchronous one is unsafe."""
    state = _state(**changes)
    assert state.mode is mode
    assert state.unsafe is unsafe
    assert state.describe().startswith(("unsafe" if unsafe else "safe") + f" ({mode.value}:")


def test_unsafe_description_names_the_settings_and_the_risk() -> None:
    """The unsafe line says which settings make commits not wait and what can be lost."""
    line = _state(synchronous_commit="local").describe()
    assert "synchronous_commit=local" in line
    assert "can be lost at failover" in line
    assert "node 10.0.0.5:5432" in line


@pytest.mark.parametrize(
    ("changes", "failover"),
    [
        ({"timeline": 2}, True),
        ({"system_identifier": "1"}, True),
        ({"host": "10.0.0.6", "standbys": 0}, False),
    ],
)
def test_a_failover_is_another_timeline_or_system(
    changes: dict[str, Any],
    failover: bool,  # noqa: FBT001
) -> None:
    """Another timeline or system identifier is another history; another address alone is not."""
    assert _state(**changes).changed_history(_state()) is failover


def test_a_unix_socket_node_has_no_address() -> None:
    """Over a Unix socket the server reports no address, shown as the local socket."""
    assert _state(host=None, port=None).node == "local socket"
