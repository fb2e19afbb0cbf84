"""The reconnect policy: a short fixed wait during a leader change, backoff when nothing answers."""

from __future__ import annotations

from ql3_cluster_control._backoff import Backoff, ReconnectPolicy
from ql3_cluster_postgres import NoWritableServerError
from ql3_runtime_core import RepositoryUnavailableError


class _Ticks:
    """A hand-moved monotonic reading (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _policy(ticks: _Ticks) -> ReconnectPolicy:
    return ReconnectPolicy(
        Backoff(initial_s=0.2, maximum_s=10.0), fast_s=0.1, fast_window_s=30.0, monotonic=ticks
    )


def test_read_only_answers_get_the_short_delay_however_many() -> None:
    """Every no-writable-server fault inside the window waits between half and all of fast_s."""
    ticks = _Ticks()
    policy = _policy(ticks)
    for _ in range(200):
        ticks.now += 0.1
        assert 0.05 <= policy.delay_s(NoWritableServerError("read-only")) <= 0.1


def test_silence_backs_off_exponentially_and_past_the_window_so_do_read_only_answers() -> None:
    """Other faults double the bound each time; after the window a read-only answer does too."""
    ticks = _Ticks()
    policy = _policy(ticks)
    bounds = [policy.backoff.delay_s(n) for n in range(1, 8)]
    assert all(delay <= 10.0 for delay in bounds)
    for _ in range(12):
        policy.delay_s(RepositoryUnavailableError("connection refused"))
    assert policy.faults == 12
    ticks.now = 31.0
    slow = [policy.delay_s(NoWritableServerError("read-only")) for _ in range(50)]
    assert max(slow) > 0.1  # the 13th+ slow fault may wait up to 10 s; 50 draws exceed 0.1 s


def test_a_success_starts_a_new_streak() -> None:
    """After reset() the window starts again at the next fault."""
    ticks = _Ticks()
    policy = _policy(ticks)
    policy.delay_s(NoWritableServerError("read-only"))
    ticks.now = 100.0
    policy.reset()
    assert policy.delay_s(NoWritableServerError("read-only")) <= 0.1
    assert policy.faults == 1
