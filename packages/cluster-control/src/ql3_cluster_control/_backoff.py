"""How long to wait before the next try: jittered exponential backoff, and the reconnect policy.

Replicas that lost the database together must not reconnect in lock-step; jitter spreads them
(tenacity's `wait_random_exponential` and `wait_random`). Delays are slept with a stop event's
`wait`, a monotonic wait (rule zero).

The reconnect policy (DESIGN §13) tells two kinds of outage apart. While a server answers but
none accepts writes (`NoWritableServerError`: standbys answering "read-only", a primary shutting
down, a promotion in progress) an HA manager is changing leaders, which takes seconds: the
replica retries after a short fixed delay, so it admits again within about that delay of the new
leader accepting writes. When no host answers at all (refused everywhere, timeouts), the cluster
is down: the delay doubles, so replicas do not hammer it. The short delay is bounded in time too
(`fast_window_s` from the first fault), so a DSN that only ever reaches a standby backs off.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ql3_cluster_postgres import NoWritableServerError
from tenacity import RetryCallState, wait_random, wait_random_exponential

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Backoff", "ReconnectPolicy"]


def _state(attempt: int) -> RetryCallState:
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]  # tenacity only reads attempt_number here
    state.attempt_number = max(attempt, 1)
    return state


class Backoff:
    """Delay before attempt `n + 1`, random in `[0, min(maximum, initial * 2**(n-1))]`."""

    def __init__(self, *, initial_s: float, maximum_s: float) -> None:
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self._wait = wait_random_exponential(multiplier=initial_s, max=maximum_s)

    def delay_s(self, attempt: int) -> float:
        """Return the jittered delay after failed attempt number `attempt` (1-based)."""
        # Full jitter may draw (almost) zero; a tenth of the initial delay keeps a replica from
        # reconnecting in a tight loop against a database that just refused it.
        return max(float(self._wait(_state(attempt))), self.initial_s / 10)


class ReconnectPolicy:
    """The wait after each fault of a streak: short and fixed during a leader change, else backoff.

    `reset()` after a success starts a new streak. `monotonic` is injectable for tests.
    """

    def __init__(
        self,
        backoff: Backoff,
        *,
        fast_s: float,
        fast_window_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = backoff
        self.fast_s = fast_s
        self.fast_window_s = fast_window_s
        self._fast_wait = wait_random(min=fast_s / 2, max=fast_s)
        self._monotonic = monotonic
        self._streak_started: float | None = None
        self._slow_faults = 0
        self.faults = 0

    def reset(self) -> None:
        """Forget the streak: the last try succeeded."""
        self._streak_started = None
        self._slow_faults = 0
        self.faults = 0

    def delay_s(self, exc: BaseException) -> float:
        """Return how long to wait after fault `exc`, counting it in the streak."""
        now = self._monotonic()
        if self._streak_started is None:
            self._streak_started = now
        self.faults += 1
        if self.leader_changing(exc) and now - self._streak_started < self.fast_window_s:
            return float(self._fast_wait(_state(self.faults)))
        self._slow_faults += 1
        return self.backoff.delay_s(self._slow_faults)

    @staticmethod
    def leader_changing(exc: BaseException) -> bool:
        """Tell whether `exc` means a server answered but none accepts writes (yet)."""
        return isinstance(exc, NoWritableServerError)
