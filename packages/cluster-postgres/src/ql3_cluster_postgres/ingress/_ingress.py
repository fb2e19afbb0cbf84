"""WorkerIngress: how workers take admitted attempts, hold them and report on them.

It implements `ql3_runtime_core.WorkerRepository` as role `ql3_worker_ingress`, which never
touches schedules and writes only through the SECURITY DEFINER functions of migration 0007: each
method calls one of them (`sql/<method>.sql`), which reads the database clock once, binds the
lease to the login that took it, makes only the transitions of the attempt state machine and
appends their events. Leases are the database's: a take sets the expiry to the database time +
the lease, a heartbeat (`renew_leases`) extends it while it has not expired by the database
clock, and only `abandon_expired_attempts` acts on an expired one.

Each write runs in its own transaction (`_sessions`): a COMMIT whose answer was lost, or
acknowledged only with the synchronous-replication cancel WARNING, raises `UncertainWriteError`
(a `RepositoryUnavailableError`). Such a write is settled from durable facts after a durability
barrier on a fresh connection: `settle_taken_attempts` for a take, `finish_attempt(...,
settle=True)` for a finish. A renewal needs no settling: an unconfirmed renewal only makes its
worker kill the command earlier. Every call has a client-side deadline, so a server gone silent
cannot hold a worker's thread. Rows are read by column name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from ql3_runtime_core import (
    OWNER_ID_MAX_LENGTH,
    AbandonedAttempt,
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    FinishedAttempt,
    InvalidArgumentError,
    RepositoryUnavailableError,
    TakenAttempt,
    TaskExecution,
)

from ql3_cluster_postgres._bounds import check_lease, check_limit
from ql3_cluster_postgres._connect import close_quietly
from ql3_cluster_postgres._durability import UncertainWriteError, acknowledged_write
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.schema import check_schema_version

from ._sessions import IngressSessions, Row

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from uuid import UUID

__all__ = ["TaskConnection", "WorkerIngress"]

# What a transactional Python task gets: the worker's connection, inside the transaction that
# records its success (psycopg forbids commit() and rollback() on it there).
TaskConnection = psycopg.Connection[Any]

# What a finish records for a transactional task when the work itself did not end the attempt.
_SUCCEEDED = AttemptResult(outcome=AttemptOutcome.SUCCEEDED)


def _check_worker_id(worker_id: str) -> None:
    """Refuse a worker id the attempts_worker_length CHECK refuses, or one a person cannot read."""
    if not 1 <= len(worker_id) <= OWNER_ID_MAX_LENGTH or worker_id != worker_id.strip():
        requirement = f"must be 1..{OWNER_ID_MAX_LENGTH} characters without outer whitespace"
        raise InvalidArgumentError("worker_id", worker_id, requirement)
    if not worker_id.isprintable():
        raise InvalidArgumentError("worker_id", worker_id, "must be printable")


@dataclass
class _TaskTransaction:
    """How a transactional task's transaction ended: the finish row, or why it rolled back."""

    row: Row | None = None
    raised: Exception | None = None


class WorkerIngress(IngressSessions):
    """Take, renew, finish, release and abandon attempts (role `ql3_worker_ingress`).

    Args:
        conninfo: libpq connection string of a `ql3_worker_ingress` login.
        application_name: shown in `pg_stat_activity`.
        max_connections: pool size; a worker running N attempts at once wants N + 2 (a
            transactional Python task holds one for its whole run).
        connect_timeout_s: how long a connection attempt (or a wait for a pooled one) may take.
        statement_timeout_ms: the sessions' statement and idle-in-transaction timeout; the
            client cuts a call that has had no answer 1 s after it.
        durability_timeout_ms: how long the durability barrier that settles an uncertain write
            may wait for the synchronous standby.

    """

    # -- the protocol -----------------------------------------------------------------------

    def check_schema(self) -> int:
        """Return the schema version, or raise `SchemaMismatchError` when it is not this build's."""
        action = "ingress: check schema version"
        with self._connection(action) as conn, self._deadline(conn, action):
            return check_schema_version(conn)

    def take_attempts(
        self,
        *,
        worker_id: str,
        lease_token: UUID,
        lease_ms: int,
        limit: int,
        python_tasks: Sequence[str] = (),
        commands: bool = True,
    ) -> list[TakenAttempt]:
        """Take up to `limit` eligible queued attempts under `lease_token` (see the protocol).

        Raises:
            InvalidArgumentError: a limit, lease or worker id out of bounds (nothing sent).
            UncertainWriteError: the answer was lost or only locally acknowledged; settle it
                with `settle_taken_attempts` before taking again.

        """
        check_limit(limit)
        check_lease(lease_ms)
        _check_worker_id(worker_id)
        params = {
            "worker_id": worker_id,
            "lease_token": lease_token,
            "lease_ms": lease_ms,
            "batch_limit": limit,
            "python_tasks": list(python_tasks),
            "commands": commands,
        }
        # Guarded: a take sent into a partition must not commit when it heals (`_sessions`).
        rows = self._write("take_attempts", params, "ingress: take attempts", guarded=True)
        return [_taken(row) for row in rows]

    def settle_taken_attempts(
        self, worker_id: str, lease_token: UUID, known_attempt_ids: Sequence[int]
    ) -> list[int]:
        """Hand back, from durable facts, what a take gave this worker without its knowing."""
        _check_worker_id(worker_id)
        action = "ingress: settle taken attempts"
        known = set(known_attempt_ids)

        def release_unknown(conn: psycopg.Connection[Any]) -> list[int]:
            held = self._read_on(conn, "held_attempts", {"lease_token": lease_token}, action)
            unknown = [int(row["attempt_id"]) for row in held if row["attempt_id"] not in known]
            if not unknown:
                return []
            params = {"worker_id": worker_id, "lease_token": lease_token, "attempt_ids": unknown}
            rows = self._write_on(conn, "release_attempts", params, action)
            return [int(row["attempt_id"]) for row in rows]

        return self._settled(action, release_unknown)

    def renew_leases(
        self, lease_token: UUID, attempt_ids: Sequence[int], lease_ms: int
    ) -> dict[int, int]:
        """Extend the unexpired leases held under `lease_token`; attempt id -> new expiry."""
        check_lease(lease_ms)
        if not attempt_ids:
            return {}
        params = {
            "lease_token": lease_token,
            "attempt_ids": list(attempt_ids),
            "lease_ms": lease_ms,
        }
        rows = self._write("renew_leases", params, "ingress: renew leases")
        return {int(row["attempt_id"]): int(row["lease_expires_at_ms"]) for row in rows}

    def finish_attempt(
        self,
        attempt_id: int,
        lease_token: UUID,
        result: AttemptResult,
        *,
        settle: bool = False,
    ) -> FinishedAttempt:
        """Record the end of a held attempt and queue its successor if it did not succeed.

        With `settle` (a retry after an uncertain finish) a durability barrier on a fresh
        connection comes first, so an "already recorded" answer is a durable fact.
        """
        params = _finish_params(attempt_id, lease_token, result)
        action = f"ingress: finish attempt {attempt_id}"
        if settle:
            rows = self._settled(
                action, lambda conn: self._write_on(conn, "finish_attempt", params, action)
            )
        else:
            rows = self._write("finish_attempt", params, action)
        return _finished(attempt_id, rows[0])

    def finish_in_transaction(
        self,
        attempt_id: int,
        lease_token: UUID,
        work: Callable[[TaskConnection], object],
        *,
        timeout_ms: int,
    ) -> FinishedAttempt:
        """Run `work(connection)` and record success in its transaction (see the protocol).

        The transaction's statement and idle timeouts become the task's timeout (plus the
        statement timeout); the client cuts the call after that and the usual margin.
        """
        action = f"ingress: finish attempt {attempt_id} in its task's transaction"
        params = _finish_params(attempt_id, lease_token, _SUCCEEDED)
        ended = _TaskTransaction()
        seconds = timeout_ms / 1000 + self._deadline_s
        with self._connection(action) as conn, self._deadline(conn, action, seconds):
            try:
                with acknowledged_write(conn, action), conn.transaction() as tx:
                    limit = {"timeout_ms": timeout_ms + self._statement_timeout_ms}
                    send(conn, "task_transaction_timeouts", limit)
                    ended.row = self._work_then_finish(conn, work, params, ended)
                    if ended.row is None or ended.row["finished_id"] is None:
                        raise psycopg.Rollback(tx)
            except UncertainWriteError:
                close_quietly(conn)
                raise
        if ended.raised is not None:
            raise ended.raised
        if ended.row is None:  # pragma: no cover - a refusal always comes with its row
            msg = f"{action}: no answer from the finish"
            raise RepositoryUnavailableError(msg)
        return _finished(attempt_id, ended.row)

    @staticmethod
    def _work_then_finish(
        conn: TaskConnection,
        work: Callable[[TaskConnection], object],
        params: Mapping[str, Any],
        ended: _TaskTransaction,
    ) -> Row | None:
        """Run the task, then the finish; None when the task failed (it is rolled back)."""
        try:
            work(conn)
        except Exception as exc:  # noqa: BLE001  # the task's failure, raised again after rollback
            ended.raised = exc
            return None
        if conn.info.transaction_status is TransactionStatus.INERROR:
            # A statement of the task failed and the task went on: nothing it wrote can commit.
            msg = "a statement of the task's transaction failed; nothing it wrote was kept"
            ended.raised = RuntimeError(msg)
            return None
        with conn.cursor(row_factory=dict_row) as cur:
            (row,) = send(cur, "finish_attempt", params).fetchall()
        return row

    def release_attempts(
        self, worker_id: str, lease_token: UUID, attempt_ids: Sequence[int]
    ) -> list[int]:
        """Put the attempts held under `lease_token` back to queued; return the released ids."""
        _check_worker_id(worker_id)
        if not attempt_ids:
            return []
        params = {
            "worker_id": worker_id,
            "lease_token": lease_token,
            "attempt_ids": list(attempt_ids),
        }
        # Guarded: a release sent into a partition must not land after the worker reported it
        # as not done (`_sessions`); the attempt then waits for its lease, as the worker said.
        rows = self._write("release_attempts", params, "ingress: release attempts", guarded=True)
        return [int(row["attempt_id"]) for row in rows]

    def abandon_expired_attempts(self, limit: int) -> list[AbandonedAttempt]:
        """Mark up to `limit` attempts whose lease expired abandoned; queue their successors."""
        check_limit(limit)
        rows = self._write(
            "abandon_expired_attempts", {"batch_limit": limit}, "ingress: abandon expired"
        )
        return [AbandonedAttempt.model_validate(row) for row in rows]

    def append_event(
        self,
        run_id: int,
        attempt_id: int,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        lease_token: UUID,
    ) -> int | None:
        """Append an event to an attempt held under `lease_token`, at database time.

        Returns the event id, or None when the attempt is not held under that token by this
        login (nothing is written). Kinds `run.*` and `attempt.*` belong to the transitions.

        Raises:
            InvalidArgumentError: an empty kind (nothing sent).
            DatabaseError: the database refused the kind or payload (named in the message).

        """
        if not kind:
            raise InvalidArgumentError("kind", kind, "must not be empty")
        params = {
            "run_id": run_id,
            "attempt_id": attempt_id,
            "lease_token": lease_token,
            "kind": kind,
            "payload": Jsonb(dict(payload or {})),
        }
        rows = self._write("append_event", params, f"ingress: append event to run {run_id}")
        return int(rows[0]["id"]) if rows else None


def _finish_params(attempt_id: int, lease_token: UUID, result: AttemptResult) -> dict[str, Any]:
    return {
        "attempt_id": attempt_id,
        "lease_token": lease_token,
        "state": result.outcome.value,
        "exit_code": result.exit_code,
        # PostgreSQL text cannot hold NUL: a binary output shows it as U+FFFD.
        "output_tail": result.output_tail.replace("\x00", "\ufffd"),
    }


def _finished(attempt_id: int, row: Row) -> FinishedAttempt:
    """Build the answer to a finish from its row (read by name)."""
    found = row["state_found"]
    return FinishedAttempt(
        attempt_id=attempt_id,
        recorded=row["finished_id"] is not None,
        finished_at_ms=row["finished_at_ms"],
        next_attempt_id=row["next_attempt_id"],
        next_not_before_ms=row["next_not_before_ms"],
        state_found=None if found is None else AttemptState(found),
        ended_by_this_lease=bool(row["ended_by_this_lease"]),
    )


def _taken(row: Row) -> TakenAttempt:
    """Build a taken attempt from its row (read by name); the task's columns make its execution."""
    execution = TaskExecution(
        command=row.pop("command"),
        max_attempts=row.pop("max_attempts"),
        timeout_ms=row.pop("timeout_ms"),
        retry_backoff_ms=row.pop("retry_backoff_ms"),
    )
    return TakenAttempt.model_validate({**row, "execution": execution})
