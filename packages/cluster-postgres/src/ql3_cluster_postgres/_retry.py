"""The package's one retry policy (tenacity) and its lists of SQLSTATEs worth another try.

Two kinds of retry happen below the service loop, and both live here:

- **Rerun the transaction now** (`RetryPolicy`): a SERIALIZABLE commit or an admin transaction
  that lost a serialization conflict or a deadlock (`RETRYABLE_SQLSTATES`) is run again, from
  its first statement, a bounded number of times. Each try re-executes every statement, so a
  commit samples the database clock afresh (rule zero). Role provisioning uses the same policy
  with a short growing wait, and also retries the races of concurrent role creation.
- **Retry later, after reconnecting** (`is_transient`): errors that `wrap_error` turns into
  `RepositoryUnavailableError`, which the Coordinator's service loop answers with its jittered
  backoff (cluster-control's `Backoff`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

import psycopg
from ql3_runtime_core import log_event
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_incrementing,
    wait_none,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from tenacity.wait import WaitBaseT

__all__ = [
    "PROVISIONING_RETRY",
    "RETRYABLE_SQLSTATES",
    "ROLE_RACE_SQLSTATES",
    "TRANSACTION_RETRY",
    "RetryPolicy",
    "is_transient",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# THE list: rerun the whole transaction at once. serialization_failure (SSI or a concurrent
# update under REPEATABLE READ / SERIALIZABLE) and deadlock_detected. Nothing else is safe to
# replay blindly: any other error is the server saying the transaction is wrong, not unlucky.
RETRYABLE_SQLSTATES: Final = frozenset({"40001", "40P01"})

# Provisioning from several processes at once races on cluster-global roles: duplicate_object and
# unique_violation (CREATE ROLE twice) and internal_error "tuple concurrently updated" (ALTER ROLE
# twice). Retried only around provisioning, where the second try finds the role and moves on.
ROLE_RACE_SQLSTATES: Final = frozenset({"42710", "23505", "XX000"})

# SQLSTATE classes a reconnect may cure: connection exception, transaction rollback, insufficient
# resources, operator intervention, system error; and a session the server ended for idling
# inside a transaction (25P03). `wrap_error` maps them to RepositoryUnavailableError.
_TRANSIENT_CLASSES: Final = frozenset({"08", "40", "53", "57", "58"})
_TRANSIENT_CODES: Final = frozenset({"25P03"})


def is_transient(sqlstate: str | None) -> bool:
    """Tell whether an error with `sqlstate` is worth retrying later, on a new connection."""
    if sqlstate is None:
        return False
    return sqlstate[:2] in _TRANSIENT_CLASSES or sqlstate in _TRANSIENT_CODES


def _sleep(seconds: float) -> None:
    # tenacity calls sleep even for a zero wait; a transaction rerun at once should not yield.
    if seconds > 0:
        time.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """Rerun one unit of work while it fails with a listed SQLSTATE, at most `retries` times.

    `call(attempt)` runs `attempt(retries_so_far)`; the last error is raised as it is once the
    retries are spent or for an error not listed (the caller wraps it). `sleep` is injectable so
    tests of a waiting policy need no real sleep; `wait` is a tenacity wait strategy.
    """

    name: str
    retries: int
    sqlstates: frozenset[str] = RETRYABLE_SQLSTATES
    wait: WaitBaseT = field(default_factory=wait_none)
    sleep: Callable[[float], None] = _sleep

    def __post_init__(self) -> None:
        if self.retries < 0:
            msg = f"retries: must be >= 0, got {self.retries}"
            raise ValueError(msg)

    def retryable(self, exc: BaseException) -> bool:
        """Tell whether `exc` is a database error this policy reruns."""
        return isinstance(exc, psycopg.Error) and exc.sqlstate in self.sqlstates

    def with_retries(self, retries: int) -> RetryPolicy:
        """Return the same policy with another bound (the repository's is configurable)."""
        return RetryPolicy(self.name, retries, self.sqlstates, self.wait, self.sleep)

    def call(self, attempt: Callable[[int], _T]) -> _T:
        """Run `attempt(retries so far)` until it returns or must not be retried; see the class.

        The first try runs outside tenacity: it is the common case on the hot path (a commit
        without conflict), and building and stepping a `Retrying` costs 80 to 120 µs there
        (measured between database round trips) against a bare call's nothing. Only
        a retryable failure enters tenacity, which replays that failure as its first attempt,
        so waits, the bound and the retry log are all tenacity's.
        """
        try:
            return attempt(0)
        except psycopg.Error as exc:
            if not self.retryable(exc) or self.retries == 0:
                raise
            first: psycopg.Error | None = exc
        retrying = Retrying(
            retry=retry_if_exception(self.retryable),
            stop=stop_after_attempt(self.retries + 1),
            wait=self.wait,
            sleep=self.sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        for try_ in retrying:
            with try_:
                if first is not None:
                    failed, first = first, None
                    raise failed
                return attempt(try_.retry_state.attempt_number - 1)
        raise AssertionError  # pragma: no cover - the loop returns or raises

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        sqlstate = error.sqlstate if isinstance(error, psycopg.Error) else None
        log_event(
            logger,
            logging.DEBUG,
            "retry.retrying",
            policy=self.name,
            attempt=state.attempt_number,
            sqlstate=sqlstate,
        )


# Admin transactions meeting a runtime commit on the same rows: a few immediate reruns. The
# repository's commit uses the same policy with its configurable bound (`with_retries`).
TRANSACTION_RETRY: Final = RetryPolicy("transaction", retries=3)

# Role provisioning: 5 tries, 50 ms, 100 ms, ... apart, so a racing provisioner can finish.
PROVISIONING_RETRY: Final = RetryPolicy(
    "provisioning",
    retries=4,
    sqlstates=RETRYABLE_SQLSTATES | ROLE_RACE_SQLSTATES,
    wait=wait_incrementing(start=0.05, increment=0.05),
)
