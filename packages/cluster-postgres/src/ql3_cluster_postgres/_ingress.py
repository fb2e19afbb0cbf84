"""WorkerIngress: how workers take admitted attempts and report on them, as `ql3_worker_ingress`.

Workers never touch schedules (SPEC §5). Connections come from a small psycopg-pool pool, so
the threads of one worker process share it. Every state change happens at database time, never
moves an attempt's `updated_at_ms` backwards, and appends its event in the same statement.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from ._bounds import check_limit
from ._connect import ConnectionOptions, ConnectionSettings, wrap_error
from ._errors import AttemptStateError
from ._lifecycle import Closing
from ._sql import query

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = ["QueuedAttempt", "WorkerIngress"]

_Row = tuple[Any, ...]


class QueuedAttempt(BaseModel):
    """An attempt a worker has taken (now `running`), with the occurrence it executes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempt_id: int
    run_id: int
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    attempt_number: int
    created_at_ms: int
    taken_at_ms: int
    task_name: str
    payload: dict[str, Any]


class WorkerIngress(Closing):
    """Take queued attempts and record their progress (role `ql3_worker_ingress`)."""

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

    def _one(self, name: str, params: Mapping[str, Any], action: str) -> _Row:
        with self._connection(action) as conn:
            row: _Row | None = conn.execute(query(name), params).fetchone()
        if row is None:  # pragma: no cover - these statements always return one row
            msg = f"{action}: statement {name} returned no row"
            raise LookupError(msg)
        return row

    def take_queued_attempts(self, limit: int) -> list[QueuedAttempt]:
        """Take up to `limit` queued attempts, oldest first, marking them running."""
        check_limit(limit)
        with self._connection("ingress: take queued attempts") as conn:
            rows = conn.execute(query("take_queued_attempts"), {"batch_limit": limit}).fetchall()
        return [
            QueuedAttempt(
                attempt_id=row[0],
                run_id=row[1],
                schedule_id=row[2],
                task_id=row[3],
                scheduled_for_ms=row[4],
                attempt_number=row[5],
                created_at_ms=row[6],
                taken_at_ms=row[7],
                task_name=row[8],
                payload=row[9],
            )
            for row in rows
        ]

    def mark_running(self, attempt_id: int) -> int:
        """Move a queued attempt to running; returns its new `updated_at_ms` (database time)."""
        return self._transition(attempt_id, "running", ("queued",), "attempt.running", {})

    def mark_succeeded(self, attempt_id: int) -> int:
        """Move a running attempt to succeeded; returns its new `updated_at_ms`."""
        return self._transition(attempt_id, "succeeded", ("running",), "attempt.succeeded", {})

    def mark_failed(self, attempt_id: int, error: str) -> int:
        """Move a queued or running attempt to failed, recording `error` in the event."""
        payload = {"error": error}
        return self._transition(
            attempt_id, "failed", ("queued", "running"), "attempt.failed", payload
        )

    def _transition(
        self,
        attempt_id: int,
        state: str,
        from_states: tuple[str, ...],
        kind: str,
        payload: Mapping[str, Any],
    ) -> int:
        params = {
            "attempt_id": attempt_id,
            "state": state,
            "from_states": list(from_states),
            "kind": kind,
            "payload": Jsonb(dict(payload)),
        }
        action = f"ingress: mark attempt {attempt_id} {state}"
        updated, _, before = self._one("set_attempt_state", params, action)
        if updated is None:
            raise AttemptStateError(attempt_id, before, f"mark it {state}")
        return int(updated)

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
        row = self._one("append_event", params, f"ingress: append event to run {run_id}")
        return int(row[0])
