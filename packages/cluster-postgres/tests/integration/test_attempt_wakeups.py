"""AttemptWakeups and migration 0015's `ql3_attempt_queued` notification, on real PostgreSQL.

One notification per transaction that queued attempts (never one per row), none for one that
queued nothing, delivered only at COMMIT; a lost listening connection is an error the next wait
recovers from by connecting again (and saying a poll is due).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit, admit_due, take
from ql3_cluster_postgres import AttemptWakeups, WorkerIngress
from ql3_runtime_core import AttemptOutcome, AttemptResult, RepositoryUnavailableError
from repo_helpers import make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

# Long enough for a notification already committed to arrive; a missing one costs this once.
_QUIET_S = 0.5


def _drain(wakeups: AttemptWakeups) -> int:
    """Count the notifications waiting now (each wait returns after at most `_QUIET_S`)."""
    count = 0
    while wakeups.wait(_QUIET_S):
        count += 1
    return count


def test_one_notification_per_admitting_transaction(ql3_db: Ql3Database) -> None:
    """Five Runs admitted in one commit notify once; the first wait after connecting says poll."""
    with AttemptWakeups(ql3_db.dsn("worker_ingress")) as wakeups:
        assert wakeups.wait(0.0) is True  # just connected: what was queued before notified nobody
        assert _drain(wakeups) == 0
        assert len(admit(ql3_db, 5)) == 5
        assert _drain(wakeups) == 1


def test_a_finish_that_queues_a_successor_notifies_and_one_that_does_not_stays_quiet(
    ql3_db: Ql3Database,
) -> None:
    """A failed attempt with attempts left queues its successor (notified); a success does not."""
    admit(ql3_db, 2)
    token = uuid4()
    with (
        AttemptWakeups(ql3_db.dsn("worker_ingress")) as wakeups,
        WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress,
    ):
        assert wakeups.wait(0.0) is True
        first, second = take(ingress, token)
        assert _drain(wakeups) == 0  # taking queues nothing
        ingress.finish_attempt(
            first.attempt_id, token, AttemptResult(outcome=AttemptOutcome.SUCCEEDED)
        )
        assert _drain(wakeups) == 0
        failed = ingress.finish_attempt(
            second.attempt_id, token, AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        )
        assert failed.next_attempt_id is not None
        assert _drain(wakeups) == 1


def test_nothing_is_notified_before_commit_or_after_rollback(ql3_db: Ql3Database) -> None:
    """The notification is sent by COMMIT: a rolled-back admission wakes nobody."""
    make_schedules(ql3_db, 1, shift_back_ms=2_000)
    with (
        AttemptWakeups(ql3_db.dsn("worker_ingress")) as wakeups,
        psycopg.connect(ql3_db.dsn("owner")) as conn,
    ):
        assert wakeups.wait(0.0) is True
        (run_id,) = admit_due(ql3_db)
        assert _drain(wakeups) == 1
        # An INSERT statement fires the statement trigger even when it writes no row.
        conn.execute(
            "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms,"
            " updated_at_ms) SELECT run_id, 9, 'queued', created_at_ms, created_at_ms"
            " FROM ql3.attempts WHERE run_id = %s AND false",
            (run_id,),
        )
        assert _drain(wakeups) == 0  # not committed yet
        conn.rollback()
        assert _drain(wakeups) == 0


def test_a_lost_connection_raises_once_then_listens_again(ql3_db: Ql3Database) -> None:
    """pg_terminate_backend on the listener: the wait raises, the next one reconnects (True)."""
    with AttemptWakeups(ql3_db.dsn("worker_ingress")) as wakeups:
        assert wakeups.wait(0.0) is True
        first_pid = wakeups.backend_pid
        assert first_pid is not None
        with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first_pid,))
        with pytest.raises(RepositoryUnavailableError):
            wakeups.wait(5.0)
        assert wakeups.backend_pid is None
        assert wakeups.wait(0.0) is True
        assert wakeups.backend_pid not in {None, first_pid}
        admit(ql3_db, 1)
        assert _drain(wakeups) == 1
