"""The fenced PostgreSQL repository (DESIGN §3, §5, §6): claim, commit, release, resolve, hint.

Every time this module handles comes from `clock_timestamp()` inside the statement that uses it
(rule zero): the claim statement observes once and writes that observation, the commit statement
samples once and fences on it. The node's clock is never read; `time.monotonic()` only bounds
waits.

A claimed row whose definition this replica cannot read is quarantined (state `invalid`, with its
reason, claim released) by a second fenced statement, and reported in the claim round instead of
raised, so one bad row never stops the claim of the others (DESIGN §8). Zone rules come from the
database (`zones/_cache`): the claim statement refuses to claim while the version this replica has
loaded is not the recorded one, the replica then loads the recorded one and claims again, and
every commit is fenced on the version its decisions were made with.

One repository holds one working connection (autocommit for single statements, an explicit
SERIALIZABLE transaction for commits) and, when `wait_for_wakeup` is used, one LISTEN
connection. A lock serialises callers, so a repository may be shared between threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import dict_row

from ql3_cluster_postgres._bounds import check_lease
from ql3_cluster_postgres._connect import (
    close_quietly,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._missed import record_missed
from ql3_cluster_postgres._replication import read_replication_state
from ql3_cluster_postgres._rows import (
    DueInRow,
    NowRow,
    OverdueRow,
    named_row,
)
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.schema import check_schema_version

from ._claims import ClaimStatements
from ._commits import CommitStatements
from ._pauses import PauseStatements

if TYPE_CHECKING:
    from ql3_runtime_core import ReplicationState, ZoneRules

__all__ = ["PostgresScheduleRepository"]

# Each statement's row factory, built once: rows are read by column name (see _rows.py).
_NOW = named_row(NowRow)
_DUE_IN = named_row(DueInRow)
_OVERDUE = named_row(OverdueRow)


class PostgresScheduleRepository(ClaimStatements, CommitStatements, PauseStatements):
    """The `ql3_runtime_core.ServiceRepository` on PostgreSQL, used as role `ql3_runtime`.

    It satisfies `ScheduleRepository` (one Coordinator cycle) and the service loop's extras.

    Args:
        conninfo: libpq connection string; its own settings win over `connection`.
        connection: name, connect timeout, keepalives and `tcp_user_timeout` of both
            connections (default `ConnectionSettings()`).
        max_serialization_retries: how often one commit is retried after SQLSTATE 40001/40P01,
            each try sampling the database clock afresh.
        lock_timeout_ms: how long a statement may wait for a row lock before failing (retryable
            `RepositoryUnavailableError`) instead of hanging behind a stuck transaction.
        idle_in_transaction_timeout_ms: the server ends this repository's session if it sits
            inside a transaction that long, so a client cut off between its statement and
            COMMIT (a partition) cannot hold schedule row locks for hours.
        statement_observer: called with (name, SQL, parameters) before each statement is sent.
        durability_timeout_ms: how long the durability barrier that settles an uncertain commit
            may wait for the synchronous standby before it is cancelled (the commit then stays
            uncertain and is settled later).

    """

    def database_now_ms(self) -> int:
        """Return the database clock in epoch milliseconds (for displays and tests)."""
        (row,) = self._run("database_now_ms", {}, _NOW, "repository: read database clock")
        return row.now_ms

    def check_schema(self) -> int:
        """Return the schema version, or raise `SchemaMismatchError` when it is not this build's."""
        with self._lock:
            try:
                return int(check_schema_version(self._connection()))
            except psycopg.Error as exc:
                self._discard_on_failure()
                raise wrap_error(exc, "repository: check schema version") from exc

    def next_due_in_ms(self) -> int | None:
        """Milliseconds until the earliest claimable cursor by the database clock, or None."""
        rows = self._run("next_due_in_ms", {}, _DUE_IN, "repository: next due hint")
        # No row: no active schedule at all.
        return next((row.due_in_ms for row in rows), None)

    def count_overdue_schedules(self, lease_ms: int) -> int:
        """Count active schedules whose cursor is more than lease + grace behind the database."""
        check_lease(lease_ms)
        (row,) = self._run(
            "count_overdue_schedules", {"lease_ms": lease_ms}, _OVERDUE, "repository: count overdue"
        )
        return row.overdue

    def record_due_alerts(self) -> int:
        """Record the `missed` and `late` alerts whose bound has passed (migration 0013).

        One autocommit call of `ql3.record_due_alerts_v1`, the statement workers send too, and
        per overdue schedule one more with the occurrences `_missed.record_missed` computed with
        this replica's loaded zone rules (the recorded version only); an alert is recorded once
        whoever calls. Returns how many this call recorded.
        """
        rows = self._run("record_due_alerts", {}, dict_row, "repository: record due alerts")
        recorded = record_missed(
            rows,
            self._recorded_rules,
            lambda params: self._run(
                "record_missed_alerts", params, dict_row, "repository: record missed alerts"
            ),
        )
        return len(recorded)

    def _recorded_rules(self, recorded: str) -> ZoneRules | None:
        """Return the loaded zone rules when they are (or now load as) the recorded version."""
        with self._lock:
            check = self._zones.check(recorded)
            return self._zones.rules if check.agrees else None

    def read_replication_state(self) -> ReplicationState:
        """Read the node's role, system identifier, timeline and replication mode (DESIGN §13)."""
        with self._lock:
            try:
                return read_replication_state(self._connection())
            except psycopg.Error as exc:
                self._discard_on_failure()
                raise wrap_error(exc, "repository: read replication state") from exc

    def wait_for_wakeup(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` (monotonic) for `ql3_schedule_changed`; True if notified."""
        with self._lock:
            conn = reuse_or_connect(self._listen_conn, self._options, "repository: listen connect")
            if conn is not self._listen_conn:
                self._listen_conn = conn
                try:
                    send(conn, "listen_schedule_changed")
                except psycopg.Error as exc:
                    close_quietly(conn)
                    self._listen_conn = None
                    raise wrap_error(exc, "repository: listen") from exc
        try:
            for _ in conn.notifies(timeout=max(timeout_s, 0.0), stop_after=1):
                return True
        except psycopg.Error as exc:
            with self._lock:
                close_quietly(conn)
                self._listen_conn = None
            raise wrap_error(exc, "repository: wait for schedule changes") from exc
        return False
