"""How chaos talks to the database and waits: one-shot queries, the database clock, polling.

Every time value a verdict uses is the database's (`db_now_ms`, rule zero); `time.monotonic()`
only bounds a wait (`wait_until`, which polls a condition against a deadline, never
sleep-and-hope) or holds a fault window open (`pause`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parent.parent
NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
POLL_S = 0.1

Params = Sequence[object] | Mapping[str, object] | None
Query = str  # the chaos suite only sends literal SQL text


def ql3_executable() -> Path:
    """Return the `ql3` console script of this environment, or fail saying what to install."""
    candidate = Path(sys.executable).parent / "ql3"
    if not candidate.exists():
        msg = (
            f"chaos: no `ql3` console script next to {sys.executable}; install the"
            " ql3-cluster-control wheel into this environment (nox -s chaos does)"
        )
        raise AssertionError(msg)
    return candidate


def db_now_ms(dsn: str) -> int:
    """Read the database clock (the only clock a verdict may use)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(NOW_SQL).fetchone()
    assert row is not None
    return int(row[0])


def fetch(dsn: str, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
    """Run one statement on a fresh autocommit connection; return its rows (none for DDL)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        cursor = conn.execute(query, params)
        return list(cursor.fetchall()) if cursor.description is not None else []


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = POLL_S,
) -> float:
    """Poll `condition` until true; return the seconds waited, or fail naming `what`."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        with contextlib.suppress(psycopg.OperationalError):
            if condition():
                return time.monotonic() - started
        if time.monotonic() > deadline:
            msg = f"chaos: timed out after {timeout_s:.0f} s waiting until {what}"
            raise AssertionError(msg)
        time.sleep(interval_s)


def pause(seconds: float) -> None:
    """Let a fault act for a fixed span of monotonic time (a fault window, not a wait-for)."""
    time.sleep(seconds)
