"""The Coordinator's auto-resume step: paused spans whose until has come end by themselves.

A pause with an until must end when the database clock reaches it even when no admin runs, so
every replica asks its repository to resume such spans at its idle polls, at most every
`AUTO_RESUME_EVERY_S` (a monotonic pacing, rule zero: whether an until has come is decided by
the database clock inside the statement). The probe is one indexed statement that finds nothing
almost always; the claim and commit statements are untouched. Racing replicas write one resume
(see cluster-postgres `repository/_pauses.py`).
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["AUTO_RESUME_EVERY_S", "AutoResume", "PauseResumer"]

# Seconds between two probes of one replica (monotonic); an until is honoured within about this.
AUTO_RESUME_EVERY_S = 2.0


@runtime_checkable
class PauseResumer(Protocol):
    """A repository that can resume the spans whose until has come."""

    def resume_expired_pauses(self) -> int:
        """Resume every expired span; return how many this call resumed."""
        ...


class AutoResume:
    """Paces the probe: `step(repository)` probes when the last probe is old enough."""

    def __init__(self, every_s: float = AUTO_RESUME_EVERY_S) -> None:
        self.every_s = every_s
        self._last: float | None = None
        self.resumed = 0

    def step(self, repository: object) -> int:
        """Probe through `repository` if it can and the pace allows; return spans resumed."""
        if not isinstance(repository, PauseResumer):
            return 0
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            return 0
        self._last = now
        count = repository.resume_expired_pauses()
        self.resumed += count
        return count
