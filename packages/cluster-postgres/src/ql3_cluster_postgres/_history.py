"""Read-only views of the admitted history for the demo's verdict and live progress.

`HistoryReader` answers the questions `ql3 demo` asks of the database while and after its
replicas run: the database clock, admissions per replica, each run of some schedules with its
attempt and event counts (rows per admission 1:1:2), and the claims still held on them. The
control plane reads them through this typed API and never speaks SQL itself (issue 11.4). Rows
are read by column name into the models below, never by position.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict

from ._connect import ConnectionOptions, close_quietly, reuse_or_connect, wrap_error
from ._lifecycle import Closing
from ._sql import query

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["HistoryReader", "RunRecord"]

_T = TypeVar("_T")


class RunRecord(BaseModel):
    """One admitted run with how many attempts and events it has (1 and 2 when well formed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    attempts: int
    events: int


class _NowRow(BaseModel):
    now_ms: int


class _OwnerRow(BaseModel):
    owner_id: str
    admissions: int


class _ClaimsRow(BaseModel):
    claims: int


class HistoryReader(Closing):
    """Read the admitted history of a QL3 database; every session is read-only.

    Args:
        conninfo: libpq connection string of a role that may read `ql3.runs`, `ql3.attempts`,
            `ql3.events` and `ql3.trigger_schedules` (the demo uses the superuser; `ql3_admin`
            may too).
        application_name: shown in `pg_stat_activity`.

    One connection, opened on first use and reopened after a failure; `close()` (or `with`)
    frees it. A lock serialises callers.

    """

    def __init__(self, conninfo: str, *, application_name: str = "ql3-history") -> None:
        self._options = ConnectionOptions(
            conninfo,
            application_name=application_name,
            # A reader must never write, whatever role it is given.
            server_settings={"default_transaction_read_only": "on"},
        )
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        with self._lock:
            close_quietly(self._conn)
            self._conn = None

    def _rows(self, name: str, params: Mapping[str, Any], row_type: type[_T]) -> list[_T]:
        """Send `sql/<name>.sql` and read its rows by column name; errors become QL3 errors."""
        action = f"history: {name.removeprefix('history_')}"
        with self._lock:
            conn = self._conn = reuse_or_connect(self._conn, self._options, f"{action}: connect")
            try:
                with conn.cursor(row_factory=class_row(row_type)) as cur:
                    return cur.execute(query(name), params).fetchall()
            except psycopg.Error as exc:
                if conn.broken:
                    close_quietly(conn)
                    self._conn = None
                raise wrap_error(exc, action) from exc

    def database_now_ms(self) -> int:
        """Return the database clock in epoch milliseconds (the only clock QL3 reads)."""
        (row,) = self._rows("database_now_ms", {}, _NowRow)
        return row.now_ms

    def admissions_by_owner(self) -> dict[str, int]:
        """Count the runs each owner admitted, over the whole history, by owner id."""
        rows = self._rows("history_admissions_by_owner", {}, _OwnerRow)
        return {row.owner_id: row.admissions for row in rows}

    def runs(self, schedule_ids: Sequence[int]) -> tuple[RunRecord, ...]:
        """Return every run of the given schedules, in occurrence order, with its row counts."""
        rows = self._rows("history_runs", {"schedule_ids": list(schedule_ids)}, RunRecord)
        return tuple(rows)

    def claims_held(self, schedule_ids: Sequence[int]) -> int:
        """Count the given schedules that still record a claim (none once every replica stopped)."""
        (row,) = self._rows("history_claims_held", {"schedule_ids": list(schedule_ids)}, _ClaimsRow)
        return row.claims
