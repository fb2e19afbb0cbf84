"""Bounds of the numeric arguments the repositories pass to statements, checked before they go.

A number outside what a statement can take (a LIMIT beyond bigint, a lease the CHECK refuses)
would otherwise come back as a driver error (NumericValueOutOfRange, 22003) from deep inside a
transaction. Checking first gives a typed `InvalidArgumentError` (a `ValueError`) naming the
argument and its range, and nothing is sent.
"""

from __future__ import annotations

from typing import Final

from ql3_runtime_core import LEASE_MS_MAX, LEASE_MS_MIN, InvalidArgumentError

__all__ = ["ROW_LIMIT_MAX", "check_lease", "check_limit"]

# The most rows one claim or take statement returns: far above any configured claim batch
# (at most 1 000) or cycle budget (at most 100 000), far below what a LIMIT can hold.
ROW_LIMIT_MAX: Final = 100_000


def check_limit(limit: int, argument: str = "limit") -> None:
    """Refuse a row limit outside 1..`ROW_LIMIT_MAX`."""
    if not 1 <= limit <= ROW_LIMIT_MAX:
        raise InvalidArgumentError(argument, limit, f"must be within 1..{ROW_LIMIT_MAX}")


def check_lease(lease_ms: int, argument: str = "lease_ms") -> None:
    """Refuse a lease outside `LEASE_MS_MIN`..`LEASE_MS_MAX` (DESIGN §3)."""
    if not LEASE_MS_MIN <= lease_ms <= LEASE_MS_MAX:
        bound = f"must be within {LEASE_MS_MIN}..{LEASE_MS_MAX}"
        raise InvalidArgumentError(argument, lease_ms, bound)
