"""`ConsoleReader`: what the web console shows, read as `ql3_observer` (DESIGN §11, §15).

Each page is read in one read-only REPEATABLE READ transaction, so its tables agree with each
other and with the database instant the page says it was read at. One connection, opened on
first use (checking the schema version, like every QL3 process) and reopened after a failure;
a lock serialises the callers (the web server's worker threads).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg
from psycopg import IsolationLevel
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict

from ql3_cluster_postgres._bounds import check_limit
from ql3_cluster_postgres._connect import ConnectionOptions, close_quietly, connect, wrap_error
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.schema import check_schema_version

from ._models import (
    AdmissionRow,
    AlertsPage,
    ClaimRow,
    LatenessPoint,
    ReplicasPage,
    RunAttemptRow,
    RunCountRow,
    RunningAttemptRow,
    SchedulePage,
    ScheduleRow,
    SchedulesPage,
    SkipRow,
    VerifyResult,
    WorkersPage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["CONSOLE_ROWS_DEFAULT", "RUN_COUNT_WINDOW", "SCHEDULES_PER_PAGE", "ConsoleReader"]

# How many Runs, skip records, chart points and running attempts a page lists.
CONSOLE_ROWS_DEFAULT: Final = 50
_CHART_POINTS: Final = 200
# Bounds that keep every page's cost independent of the history and of the number of schedules:
# schedules per page of the schedules page, cron Runs behind each schedule's lateness
# percentiles, and the latest Runs one schedule's counts by outcome cover.
SCHEDULES_PER_PAGE: Final = 50
_LATENESS_RUNS: Final = 100
RUN_COUNT_WINDOW: Final = 1000

_T = TypeVar("_T")


class _Now(BaseModel):
    model_config = ConfigDict(frozen=True)
    now_ms: int


class _Count(BaseModel):
    model_config = ConfigDict(frozen=True)
    schedules: int


class _RunTotal(BaseModel):
    model_config = ConfigDict(frozen=True)
    runs: int


class _Present(BaseModel):
    model_config = ConfigDict(frozen=True)
    present: bool


class _ZoneRules(BaseModel):
    model_config = ConfigDict(frozen=True)
    version: str
    recorded_at_ms: int


class _Alert(BaseModel):
    model_config = ConfigDict(frozen=True)
    alert: dict[str, Any]


class ConsoleReader(Closing):
    """Read the console's pages from a QL3 database; never writes.

    Args:
        conninfo: libpq connection string of a `ql3_observer` login (any role that may read
            what the console shows works; the console is meant to run as the observer).
        rows: how many Runs, skip records and running attempts a page lists.
        per_page: how many schedules a page of the schedules page lists.
        window: how many of one schedule's latest Runs its counts by outcome cover.

    """

    def __init__(
        self,
        conninfo: str,
        *,
        rows: int = CONSOLE_ROWS_DEFAULT,
        per_page: int = SCHEDULES_PER_PAGE,
        window: int = RUN_COUNT_WINDOW,
    ) -> None:
        check_limit(rows, "rows")
        check_limit(per_page, "per_page")
        check_limit(window, "window")
        self._rows_limit = rows
        self._per_page = per_page
        self._window = window
        self._options = ConnectionOptions(
            conninfo,
            application_name="ql3-web",
            server_settings={"default_transaction_read_only": "on"},
        )
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        with self._lock:
            close_quietly(self._conn)
            self._conn = None

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        close_quietly(conn)
        conn = connect(self._options, "console: connect")
        try:
            check_schema_version(conn)
        except Exception:
            close_quietly(conn)
            raise
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        self._conn = conn
        return conn

    def _page(self, action: str, body: Callable[[_Send], _T]) -> _T:
        """Run `body` in one read-only snapshot; errors become QL3 errors naming `action`."""
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    return body(_Send(conn))
            except psycopg.Error as exc:
                if conn.broken:
                    close_quietly(conn)
                    self._conn = None
                raise wrap_error(exc, f"console: {action}") from exc

    def schedules(self, page: int = 1) -> SchedulesPage:
        """Return one page of schedules by name: state, reason, window, next due, outcome, lateness.

        Pages count from 1; a page past the last one is empty (its links lead back).
        """
        check_limit(page, "page")
        per_page = self._per_page

        def read(q: _Send) -> SchedulesPage:
            now = q.one("database_now_ms", {}, _Now).now_ms
            total = q.one("console_schedule_count", {}, _Count).schedules
            listed = {
                "schedule_id": None,
                "skip": (page - 1) * per_page,
                "batch_limit": per_page,
                "lateness_runs": _LATENESS_RUNS,
            }
            rows = q.all("console_schedules", listed, ScheduleRow)
            return SchedulesPage(
                now_ms=now, page=page, per_page=per_page, total=total, schedules=tuple(rows)
            )

        return self._page("schedules", read)

    def schedule(self, schedule_id: int) -> SchedulePage | None:
        """Return one schedule's page, or None when no schedule has this id."""
        limit = self._rows_limit
        window_runs = self._window

        def read(q: _Send) -> SchedulePage | None:
            now = q.one("database_now_ms", {}, _Now).now_ms
            by_id = {"schedule_id": schedule_id}
            head = {**by_id, "skip": 0, "batch_limit": 1, "lateness_runs": _LATENESS_RUNS}
            found = q.all("console_schedules", head, ScheduleRow)
            if not found:
                return None
            listed = {**by_id, "batch_limit": limit}
            window = {**by_id, "window_runs": window_runs}
            return SchedulePage(
                now_ms=now,
                schedule=found[0],
                run_total=q.one("console_run_total", by_id, _RunTotal).runs,
                window_runs=window_runs,
                run_counts=tuple(q.all("console_run_counts", window, RunCountRow)),
                runs=tuple(q.all("console_runs", listed, RunAttemptRow)),
                skips=tuple(q.all("console_skips", listed, SkipRow)),
                lateness=tuple(
                    q.all(
                        "console_lateness", {**by_id, "batch_limit": _CHART_POINTS}, LatenessPoint
                    )
                ),
            )

        return self._page(f"schedule {schedule_id}", read)

    def replicas(self) -> ReplicasPage:
        """Return the live claims, each owner's latest admission, the zone rules version."""

        def read(q: _Send) -> ReplicasPage:
            now = q.one("database_now_ms", {}, _Now).now_ms
            zone = q.all("console_zone_rules", {}, _ZoneRules)
            return ReplicasPage(
                now_ms=now,
                claims=tuple(q.all("console_claims", {}, ClaimRow)),
                admissions=tuple(q.all("console_admissions", {}, AdmissionRow)),
                zone_rules_version=zone[0].version if zone else None,
                zone_rules_recorded_at_ms=zone[0].recorded_at_ms if zone else None,
            )

        return self._page("replicas", read)

    def workers(self) -> WorkersPage:
        """Return the attempts running now with their workers and leases."""
        limit = self._rows_limit

        def read(q: _Send) -> WorkersPage:
            now = q.one("database_now_ms", {}, _Now).now_ms
            running = q.all("console_running_attempts", {"batch_limit": limit}, RunningAttemptRow)
            return WorkersPage(now_ms=now, running=tuple(running))

        return self._page("workers", read)

    def has_alerts(self) -> bool:
        """Tell whether the database has an alerts table this login may read."""
        return self._page("alerts", lambda q: q.one("console_alerts_present", {}, _Present).present)

    def alerts(self) -> AlertsPage | None:
        """Return the latest alerts; None without an alerts table (or a grant on it)."""
        limit = self._rows_limit

        def read(q: _Send) -> AlertsPage | None:
            if not q.one("console_alerts_present", {}, _Present).present:
                return None
            now = q.one("database_now_ms", {}, _Now).now_ms
            rows = [row.alert for row in q.all("console_alerts", {"batch_limit": limit}, _Alert)]
            columns = tuple(dict.fromkeys(key for row in rows for key in row))
            return AlertsPage(now_ms=now, columns=columns, alerts=tuple(rows))

        return self._page("alerts", read)

    def verify_result(self) -> tuple[int, VerifyResult | None]:
        """Return the database instant and the latest recorded verdict (None: never)."""

        def read(q: _Send) -> tuple[int, VerifyResult | None]:
            now = q.one("database_now_ms", {}, _Now).now_ms
            found = q.all("console_verify_latest", {}, VerifyResult)
            return now, (found[0] if found else None)

        return self._page("verify result", read)


class _Send:
    """Statements of one page's transaction, rows read by column name into a model."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def all(self, name: str, params: Mapping[str, Any], row_type: type[_T]) -> list[_T]:
        with self._conn.cursor(row_factory=class_row(row_type)) as cur:
            return send(cur, name, params).fetchall()

    def one(self, name: str, params: Mapping[str, Any], row_type: type[_T]) -> _T:
        (row,) = self.all(name, params, row_type)
        return row
