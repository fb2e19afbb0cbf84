"""Read-only views of the admitted and executed history: the demo's verdict, status, `runs list`.

`HistoryReader` answers the questions `ql3 demo` asks of the database while and after its
replicas and its worker run: the database clock, admissions per replica, each run of some
schedules with its attempt and event counts (1:1:2 at admission) and whether it was executed, and
the claims still held on them. It also
answers what workers did (DESIGN §10): attempts by state with the oldest queued age
(`attempt_counts`, for `ql3 status`) and the latest runs with their attempts (`recent_runs`, for
`ql3 runs list`), and the alerts recorded (`alerts` for `ql3 alerts list`, `alert_counts` for
the metrics). The control plane reads them through this typed API and never speaks SQL
itself (DESIGN §15). Rows are read by column name into the models below, never by position.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import AttemptState, InvalidArgumentError

from ._alerts import ALERT_KINDS, AlertCounts, AlertRecord
from ._bounds import check_limit
from ._connect import ConnectionOptions, close_quietly, reuse_or_connect, wrap_error
from ._lifecycle import Closing
from ._send import send

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["AttemptCounts", "AttemptRecord", "HistoryReader", "RunRecord", "RunSummary"]

# The kinds `recent_runs` filters on (runs.kind, migration 0008); None: every run.
RUN_KINDS: Final = frozenset({None, "cron", "manual"})

_T = TypeVar("_T")


class RunRecord(BaseModel):
    """One admitted run with its row counts and how far its execution got.

    `attempts` and `events` are 1 and 2 when it was just admitted; `succeeded` counts its
    succeeded attempts (1 once a worker executed it), `live` its queued or running ones (0 once
    it has ended; never more than 1). `kind` is `cron` for a Run of an occurrence and `manual`
    for one an operator triggered (`ql3 schedule trigger`), which fills no occurrence.
    `skipped` counts its attempts the overlap policy `skip` ended without executing (DESIGN §10).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    kind: str
    attempts: int
    events: int
    succeeded: int
    skipped: int
    live: int


class AttemptCounts(BaseModel):
    """Attempts by state at one database instant (`database_now_ms`).

    `queued_ready` may start now, `queued_waiting` wait for a retry's backoff to pass;
    `oldest_queued_age_ms` is how long the oldest ready one has waited (None: none waits), in
    database time. `running_lease_expired` are running attempts whose lease expired by the
    database clock that no worker has marked abandoned yet (none runs, or all are busy).
    `skipped` and `cancelled` ended by the overlap policy (skip, replace); a Run waiting for a
    slot under a cap is queued and ready.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_now_ms: int
    queued_ready: int
    queued_waiting: int
    running: int
    running_lease_expired: int
    succeeded: int
    failed: int
    timed_out: int
    abandoned: int
    oldest_queued_age_ms: int | None
    skipped: int = 0
    cancelled: int = 0

    @property
    def queued(self) -> int:
        """Every queued attempt, ready or waiting."""
        return self.queued_ready + self.queued_waiting


class AttemptRecord(BaseModel):
    """One attempt of a run as stored: its state, holder, database times and how it ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempt_id: int
    attempt_number: int
    state: AttemptState
    worker_id: str | None
    created_at_ms: int
    eligible_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    lease_expires_at_ms: int | None
    exit_code: int | None
    output_tail: str | None


class RunSummary(BaseModel):
    """One run with its attempts in number order; `state` is its latest attempt's.

    A final latest state (failed, timed_out, abandoned) means the run used up its attempts: a
    successor is always queued by the statement that ends its predecessor. `skipped` and
    `cancelled` are the overlap policy's ends (skip, replace): never retried.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: int
    # `cron` (an occurrence of the schedule) or `manual` (a trigger; `request_id` is its key).
    kind: str
    request_id: str | None
    schedule_id: int
    schedule_name: str
    scheduled_for_ms: int
    created_at_ms: int
    state: AttemptState | None
    # One jsonb array per run in history_recent_runs.sql (one round trip for runs and
    # attempts); pydantic validates each element into an AttemptRecord.
    attempts: tuple[AttemptRecord, ...]


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
        # One connection serves one statement at a time; the demo reads from several threads.
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
                    return send(cur, name, params).fetchall()
            except psycopg.Error as exc:
                # An autocommit statement that failed leaves the connection usable; only a
                # broken one is thrown away (and reopened by the next call).
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

    def attempt_counts(self) -> AttemptCounts:
        """Count attempts by state, with the oldest ready queued attempt's age (database time)."""
        (row,) = self._rows("history_attempt_counts", {}, AttemptCounts)
        return row

    def recent_runs(
        self,
        *,
        schedule: str | None = None,
        state: AttemptState | None = None,
        limit: int = 50,
        kind: str | None = None,
    ) -> tuple[RunSummary, ...]:
        """Return the latest `limit` runs (newest first) with their attempts.

        Args:
            schedule: only runs of this schedule (by name).
            state: only runs whose latest attempt is in this state.
            limit: 1..`ROW_LIMIT_MAX` runs (an `InvalidArgumentError` otherwise, nothing sent).
            kind: only `cron` runs (occurrences) or only `manual` ones (triggers); None: both.

        """
        check_limit(limit)
        if kind not in RUN_KINDS:
            raise InvalidArgumentError("kind", kind, "must be cron, manual or None")
        params = {
            "schedule": schedule,
            "state": None if state is None else state.value,
            "batch_limit": limit,
            "kind": kind,
        }
        return tuple(self._rows("history_recent_runs", params, RunSummary))

    def alerts(
        self, *, kind: str | None = None, schedule: str | None = None, limit: int = 50
    ) -> tuple[AlertRecord, ...]:
        """Return the latest `limit` alerts (newest first) with their delivery so far.

        Args:
            kind: only alerts of this kind (`missed`, `late`, `failed`, `paused`).
            schedule: only alerts of this schedule (by name).
            limit: 1..`ROW_LIMIT_MAX` alerts (an `InvalidArgumentError` otherwise, nothing sent).

        """
        check_limit(limit)
        if kind is not None and kind not in ALERT_KINDS:
            raise InvalidArgumentError("kind", kind, f"must be one of {', '.join(ALERT_KINDS)}")
        params = {"kind": kind, "schedule": schedule, "batch_limit": limit}
        return tuple(self._rows("history_alerts", params, AlertRecord))

    def alert_counts(self) -> tuple[AlertCounts, ...]:
        """Count the alerts recorded by kind, and their failed delivery attempts (metrics)."""
        return tuple(self._rows("count_alerts", {}, AlertCounts))
