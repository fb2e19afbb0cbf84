"""Bounded exponential backoff with full jitter (tenacity's `wait_random_exponential`).

Replicas that lost the database together must not reconnect in lock-step; jitter spreads them.
Delays are slept with a stop event's `wait`, a monotonic wait (rule zero).
"""

from __future__ import annotations

from tenacity import RetryCallState, wait_random_exponential

__all__ = ["Backoff"]


class Backoff:
    """Delay before attempt `n + 1`, random in `[0, min(maximum, initial * 2**(n-1))]`."""

    def __init__(self, *, initial_s: float, maximum_s: float) -> None:
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self._wait = wait_random_exponential(multiplier=initial_s, max=maximum_s)

    def delay_s(self, attempt: int) -> float:
        """Return the jittered delay after failed attempt number `attempt` (1-based)."""
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]  # tenacity only reads attempt_number here
        state.attempt_number = max(attempt, 1)
        # Full jitter may draw (almost) zero; a tenth of the initial delay keeps a replica from
        # reconnecting in a tight loop against a database that just refused it.
        return max(float(self._wait(state)), self.initial_s / 10)
