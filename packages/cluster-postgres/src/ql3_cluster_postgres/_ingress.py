"""WorkerIngress: how workers take admitted attempts, hold them and report on them (SPEC §5).

It implements `ql3_runtime_core.WorkerRepository` as role `ql3_worker_ingress`, which never
touches schedules. Each method sends one statement (`sql/<method>.sql`) that reads the database
clock once, never moves a row's times backwards and appends the events of every state change it
makes (issue 13). Leases are the database's: a take sets `lease_expires_at_ms` to the database
time + the lease, a heartbeat (`renew_leases`) extends it while it has not expired by the
database clock, and only `abandon_expired_attempts` acts on an expired one. The lease token (one
per worker process) fences every heartbeat, finish and release: a worker id is for people.

Connections come from a small psycopg-pool pool so a worker's threads (the loop and each running
attempt reporting its end) share it; rows are read by column name.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from ql3_runtime_core import (
    OWNER_ID_MAX_LENGTH,
    AbandonedAttempt,
    AttemptResult,
    AttemptState,
    FinishedAttempt,
    InvalidArgumentError,
    TakenAttempt,
    TaskExecution,
)

from ._bounds import check_lease, check_limit
from ._connect import ConnectionOptions, ConnectionSettings, wrap_error
from ._lifecycle import Closing
from ._migrations import check_schema_version
from ._sql import query

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from uuid import UUID

__all__ = ["WorkerIngress"]

_Row = dict[str, Any]


def _check_worker_id(worker_id: str) -> None:
    """Refuse a worker id the attempts_worker_length CHECK refuses, or one a person cannot read."""
    if not 1 <= len(worker_id) <= OWNER_ID_MAX_LENGTH or worker_id != worker_id.strip():
        requirement = f"must be 1..{OWNER_ID_MAX_LENGTH} characters without outer whitespace"
        raise InvalidArgumentError("worker_id", worker_id, requirement)
    if not worker_id.isprintable():
        raise InvalidArgumentError("worker_id", worker_id, "must be printable")


class WorkerIngress(Closing):
    """Take, renew, finish, release and abandon attempts (role `ql3_worker_ingress`).

    Args:
        conninfo: libpq connection string of a `ql3_worker_ingress` login.
        application_name: shown in `pg_stat_activity`.
        max_connections: pool size; a worker running N attempts at once wants N + 1.
        connect_timeout_s: how long a connection attempt (or a wait for a pooled one) may take.

    """

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3-ingress",
        max_connections: int = 4,
        connect_timeout_s: float = 5.0,
    ) -> None:
        if max_connections < 1:
            msg = f"max_connections: must be >= 1, got {max_connections}"
            raise ValueError(msg)
        options = ConnectionOptions(
            conninfo,
            ConnectionSettings(
                application_name=application_name, connect_timeout_s=connect_timeout_s
            ),
        )
        # A worker process usually runs several executor threads; a small pool lets them take
        # and report attempts concurrently, and replaces connections that broke.
        self._pool = options.pool(max_size=max_connections, timeout_s=connect_timeout_s)
        self._lock = threading.Lock()
        self._opened = False

    def close(self) -> None:
        """Close the pool and its connections."""
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False

    @contextlib.contextmanager
    def _connection(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc

    def _rows(self, name: str, params: Mapping[str, Any], action: str) -> list[_Row]:
        """Send `sql/<name>.sql`; its rows by column name."""
        with (
            self._connection(action) as conn,
            conn.cursor(row_factory=dict_row) as cur,
        ):
            return cur.execute(query(name), params).fetchall()

    def check_schema(self) -> int:
        """Return the schema version, or raise `SchemaMismatchError` when it is not this build's."""
        with self._connection("ingress: check schema version") as conn:
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
        rows = self._rows("take_attempts", params, "ingress: take attempts")
        return [_taken(row) for row in rows]

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
        rows = self._rows("renew_leases", params, "ingress: renew leases")
        return {int(row["attempt_id"]): int(row["lease_expires_at_ms"]) for row in rows}

    def finish_attempt(
        self, attempt_id: int, lease_token: UUID, result: AttemptResult
    ) -> FinishedAttempt:
        """Record the end of a held attempt and queue its successor if it did not succeed."""
        params = {
            "attempt_id": attempt_id,
            "lease_token": lease_token,
            "state": result.outcome.value,
            "exit_code": result.exit_code,
            # PostgreSQL text cannot hold NUL: a binary output shows it as U+FFFD.
            "output_tail": result.output_tail.replace("\x00", "\ufffd"),
        }
        (row,) = self._rows("finish_attempt", params, f"ingress: finish attempt {attempt_id}")
        found = row["state_found"]
        return FinishedAttempt(
            attempt_id=attempt_id,
            recorded=row["finished_id"] is not None,
            finished_at_ms=row["finished_at_ms"],
            next_attempt_id=row["next_attempt_id"],
            next_not_before_ms=row["next_not_before_ms"],
            state_found=None if found is None else AttemptState(found),
        )

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
        rows = self._rows("release_attempts", params, "ingress: release attempts")
        return [int(row["attempt_id"]) for row in rows]

    def abandon_expired_attempts(self, limit: int) -> list[AbandonedAttempt]:
        """Mark up to `limit` attempts whose lease expired abandoned; queue their successors."""
        check_limit(limit)
        rows = self._rows(
            "abandon_expired_attempts", {"batch_limit": limit}, "ingress: abandon expired"
        )
        return [AbandonedAttempt.model_validate(row) for row in rows]

    def append_event(
        self,
        run_id: int,
        attempt_id: int | None,
        kind: str,
        payload: Mapping[str, Any] | None = None,
    ) -> int:
        """Append an event to a run's history at database time; returns the event id."""
        if not kind:
            msg = "kind: must not be empty"
            raise ValueError(msg)
        params = {
            "run_id": run_id,
            "attempt_id": attempt_id,
            "kind": kind,
            "payload": Jsonb(dict(payload or {})),
        }
        (row,) = self._rows("append_event", params, f"ingress: append event to run {run_id}")
        return int(row["id"])


def _taken(row: _Row) -> TakenAttempt:
    """Build a taken attempt from its row (read by name); the task's columns make its execution."""
    execution = TaskExecution(
        command=row.pop("command"),
        max_attempts=row.pop("max_attempts"),
        timeout_ms=row.pop("timeout_ms"),
        retry_backoff_ms=row.pop("retry_backoff_ms"),
    )
    return TakenAttempt.model_validate({**row, "execution": execution})
