"""The retry policy's waits and bounds, with an injected sleep (no real sleeping).

The database side (which SQLSTATEs the commit and admin paths rerun) is
`integration/test_retry_policy.py`; here the policy object alone, fed the driver's own error
classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from psycopg import errors as pg_errors
from ql3_cluster_postgres._retry import (
    PROVISIONING_RETRY,
    TRANSACTION_RETRY,
    RetryPolicy,
    is_transient,
)

if TYPE_CHECKING:
    from collections.abc import Callable


def _failing(errors: list[Exception]) -> tuple[list[int], Callable[[int], str]]:
    """Return (tries seen, attempt) where attempt raises `errors` in turn, then returns "done"."""
    seen: list[int] = []

    def attempt(retries: int) -> str:
        seen.append(retries)
        if errors:
            raise errors.pop(0)
        return "done"

    return seen, attempt


def test_provisioning_waits_longer_after_each_race() -> None:
    """Role races are retried after 50 ms, then 100 ms, ...; the sleep is injectable."""
    slept: list[float] = []
    policy = RetryPolicy(
        PROVISIONING_RETRY.name,
        PROVISIONING_RETRY.retries,
        PROVISIONING_RETRY.sqlstates,
        PROVISIONING_RETRY.wait,
        slept.append,
    )
    seen, attempt = _failing([pg_errors.DuplicateObject("race"), pg_errors.InternalError_("race")])
    assert policy.call(attempt) == "done"
    assert seen == [0, 1, 2]
    assert slept == pytest.approx([0.05, 0.10])


def test_transactions_rerun_at_once_and_give_up_after_the_bound() -> None:
    """A serialization failure is rerun without waiting; the last error is raised as it is."""
    slept: list[float] = []
    policy = TRANSACTION_RETRY.with_retries(2)
    policy = RetryPolicy(policy.name, policy.retries, policy.sqlstates, policy.wait, slept.append)
    seen, attempt = _failing([pg_errors.SerializationFailure(str(n)) for n in range(5)])
    with pytest.raises(pg_errors.SerializationFailure, match="2"):
        policy.call(attempt)
    assert seen == [0, 1, 2]
    assert slept == [0.0, 0.0]


def test_errors_outside_the_list_are_raised_at_once() -> None:
    """A unique violation in a transaction is the server refusing it: no rerun."""
    seen, attempt = _failing([pg_errors.UniqueViolation("dup")])
    with pytest.raises(pg_errors.UniqueViolation):
        TRANSACTION_RETRY.call(attempt)
    assert seen == [0]


def test_a_negative_bound_is_refused() -> None:
    """`retries` below zero is a ValueError naming the field."""
    with pytest.raises(ValueError, match="retries: must be >= 0"):
        RetryPolicy("x", -1)


@pytest.mark.parametrize(
    ("sqlstate", "transient"),
    [("40001", True), ("08006", True), ("57P01", True), ("25P03", True), ("23505", False)],
)
def test_transient_errors_are_those_a_reconnect_may_cure(sqlstate: str, *, transient: bool) -> None:
    """Connection, rollback, resource, operator, idle-session errors are transient; others not."""
    assert is_transient(sqlstate) is transient
    assert is_transient(None) is False
