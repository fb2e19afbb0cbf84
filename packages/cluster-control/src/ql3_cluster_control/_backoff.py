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

Both are tenacity wait strategies. A loop that can block between tries (settling an uncertain
commit, recording an attempt's end) runs them through `Backoff.retrying()`, tenacity's own
`Retrying`, sleeping with `sleep_unless(event)`: a monotonic wait that a stop cuts short by
raising `RetryStopped` out of the retrying call. The service and the
worker cannot hand their loop to tenacity (between two tries they must keep renewing leases,
watching runners, noticing a stop), so they ask for the delay of their n-th fault instead:
`delay_s` reads the wait of the attempt a `Retrying` of these same waits would be at.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import NoWritableServerError
from tenacity import RetryCallState, Retrying, wait_random, wait_random_exponential

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

__all__ = ["Backoff", "ReconnectPolicy", "RetryStopped", "sleep_unless"]


class RetryStopped(Exception):  # noqa: N818 - ends a retry loop; not an error of anyone
    """Raised by a `sleep_unless` sleep when its event was set meanwhile: stop retrying."""


def sleep_unless(event: threading.Event) -> Callable[[float], None]:
    """Return a tenacity `sleep` that waits on `event` and raises `RetryStopped` once it is set."""

    def sleep(seconds: float) -> None:
        if event.wait(seconds):
            raise RetryStopped

    return sleep


def _attempt_state(retrying: Retrying, attempt: int) -> RetryCallState:
    """Return the call state `retrying` is in after `attempt` failed tries (1-based)."""
    state = RetryCallState(retry_object=retrying, fn=None, args=(), kwargs={})
    state.attempt_number = max(attempt, 1)
    return state


class Backoff:
    """Delay before attempt `n + 1`, random in `[0, min(maximum, initial * 2**(n-1))]`."""

    def __init__(self, *, initial_s: float, maximum_s: float) -> None:
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self._wait = wait_random_exponential(multiplier=initial_s, max=maximum_s)

    def __call__(self, retry_state: RetryCallState) -> float:
        """Return the jittered delay after the try `retry_state` counts (a tenacity wait)."""
        # Full jitter may draw (almost) zero; a tenth of the initial delay keeps a replica from
        # reconnecting in a tight loop against a database that just refused it.
        return max(float(self._wait(retry_state)), self.initial_s / 10)

    def retrying(self, **options: Any) -> Retrying:  # noqa: ANN401 - tenacity's own keywords
        """Return a tenacity `Retrying` waiting this backoff between tries (`options`: its own)."""
        return Retrying(wait=self, **options)

    def delay_s(self, attempt: int) -> float:
        """Return the jittered delay after failed attempt number `attempt` (1-based)."""
        return self(_attempt_state(self.retrying(), attempt))


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
            return float(self._fast_wait(_attempt_state(Retrying(), self.faults)))
        self._slow_faults += 1
        return self.backoff.delay_s(self._slow_faults)

    @staticmethod
    def leader_changing(exc: BaseException) -> bool:
        """Tell whether `exc` means a server answered but none accepts writes (yet)."""
        return isinstance(exc, NoWritableServerError)
