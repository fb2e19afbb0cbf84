"""The client-side watchdog: an earlier deadline armed while it sleeps for a later one still fires.

Arming wakes the watchdog only when the new deadline is earlier than the moment it will look
anyway. This proves the case that matters: the watchdog is asleep until a deadline 30 s away when
a call arms one of 0.5 s on a server that does not answer (`pg_sleep`); that call is cut within
a second, and the long call's connection, which ended in time, is untouched.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres._deadlines import Watchdog

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

_SHORT_S = 0.5
# The cut must come well before the statement's own 5 s and the long deadline's 30 s.
_CUT_WITHIN_S = 2.0


def test_an_earlier_deadline_wakes_the_sleeping_watchdog(ql3_db: Ql3Database) -> None:
    """Long deadline armed first; a short one armed later still cuts its silent call in time."""
    watchdog = Watchdog("test-watchdog")
    try:
        with (
            psycopg.connect(ql3_db.dsn("owner"), autocommit=True) as quiet,
            psycopg.connect(ql3_db.dsn("owner"), autocommit=True) as silent,
            watchdog.deadline(quiet, 30.0) as long_deadline,
        ):
            # Let the watchdog go to sleep until the long deadline.
            quiet.execute("SELECT 1")
            started = time.monotonic()
            with (
                pytest.raises(psycopg.OperationalError),
                watchdog.deadline(silent, _SHORT_S) as short_deadline,
            ):
                silent.execute("SELECT pg_sleep(5)")
            waited = time.monotonic() - started
            assert short_deadline.fired
            assert _SHORT_S <= waited < _CUT_WITHIN_S, f"cut after {waited:.2f} s"
            assert quiet.execute("SELECT 2").fetchone() == (2,)
        assert not long_deadline.fired
    finally:
        watchdog.close()


def test_a_call_that_ends_in_time_is_never_cut(ql3_db: Ql3Database) -> None:
    """Deadlines armed and disarmed in turn: none fires, the connection stays usable."""
    watchdog = Watchdog("test-watchdog")
    try:
        with psycopg.connect(ql3_db.dsn("owner"), autocommit=True) as conn:
            for _ in range(50):
                with watchdog.deadline(conn, 5.0) as armed:
                    conn.execute("SELECT 1")
                assert not armed.fired
            assert conn.execute("SELECT 3").fetchone() == (3,)
    finally:
        watchdog.close()
