"""One admin's connection and its transactions: retried, settled when uncertain, zone rules held.

Every admin change runs in one transaction (`_in_transaction`): retried whole on a deadlock or
serialization failure, and settled from durable facts when its COMMIT is uncertain (`_settle`).
Occurrences are computed with the zone rules the database records, held FOR SHARE from the start
of each placing transaction (`_zone_rules`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from ql3_runtime_core import (
    ZoneRules,
    log_event,
    zone_rules_version,
)

from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    close_quietly,
    connect,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._durability import UncertainWriteError, acknowledged_write, settle_durably
from ql3_cluster_postgres._errors import (
    DatabaseError,
    ZoneRulesUnavailableError,
)
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._retry import TRANSACTION_RETRY
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.zones import connection_zone_rules, stored_zone_count

from ._statements import fetch_rows

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["AdminSession", "database_now", "placement_now"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def database_now(conn: psycopg.Connection[Any], name: str = "database_now_ms") -> int:
    """Read the database clock in epoch ms with statement `name` (rule zero)."""
    row = send(conn, name, rows=dict_row).fetchone()
    if row is None:  # pragma: no cover - the statement always returns one row
        msg = "admin: the database clock statement returned no row"
        raise DatabaseError(msg)
    return int(row["now_ms"])


def _nothing(_conn: psycopg.Connection[Any]) -> None:
    """Find no witness: settling a change without one means running it again."""
    return


def placement_now(conn: psycopg.Connection[Any]) -> int:
    """Read the time new cursors are placed after; call it only once the rows are locked."""
    return database_now(conn, "placement_now_ms")


class AdminSession(Closing):
    """The connection, lock and transactions every admin change shares; see `ScheduleAdmin`."""

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3-admin",
        step_hook: Callable[[str], None] | None = None,
        durability_timeout_ms: int = 2_000,
    ) -> None:
        if durability_timeout_ms <= 0:
            msg = f"durability_timeout_ms: must be > 0, got {durability_timeout_ms}"
            raise ValueError(msg)
        self._options = ConnectionOptions(conninfo, application_name=application_name)
        self._durability_timeout_s = durability_timeout_ms / 1000
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self._step_hook = step_hook
        # The stored rules of each recorded version seen, zones read on first use (a version's
        # data never changes once stored).
        self._rules: dict[str, ZoneRules] = {}

    def _step(self, name: str) -> None:
        if self._step_hook is not None:
            self._step_hook(name)

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        with self._lock:
            close_quietly(self._conn)
            self._conn = None

    def _in_transaction(
        self,
        action: str,
        body: Callable[[psycopg.Connection[Any]], T],
        *,
        landed: Callable[[psycopg.Connection[Any]], T | None] | None = None,
    ) -> T:
        """Run `body` in one admin transaction; psycopg errors become QL3 errors naming `action`.

        A deadlock or serialization failure (an admin change meeting a runtime commit on the
        same rows) runs the whole transaction again, a few times, before giving up: the
        package's one retry policy (`TRANSACTION_RETRY`). A COMMIT whose reply was lost or that
        was acknowledged only with the sync-rep WARNING is settled from durable facts before
        anything is returned (`_settle`); `landed` reads whether such a change is there.
        """

        def attempt(_retries: int) -> T:
            with self._lock:
                conn = self._conn = reuse_or_connect(
                    self._conn, self._options, f"{action}: connect"
                )
                try:
                    with acknowledged_write(conn, action), conn.transaction():
                        return body(conn)
                except psycopg.Error:
                    if conn.broken:
                        close_quietly(conn)
                        self._conn = None
                    raise

        try:
            return TRANSACTION_RETRY.call(attempt)
        except UncertainWriteError as uncertain:
            return self._settle(action, uncertain, body, landed)
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc

    def _settle(
        self,
        action: str,
        uncertain: UncertainWriteError,
        body: Callable[[psycopg.Connection[Any]], T],
        landed: Callable[[psycopg.Connection[Any]], T | None] | None,
    ) -> T:
        """Settle an admin change whose COMMIT is uncertain, on a fresh connection.

        The durability barrier passes first, so what is read afterwards is what a failover
        keeps. If `landed` finds the change, that is the result. Otherwise the change is run
        again: every admin change reconciles the durable rows towards what was asked (an add
        whose schedule is missing creates it, a pause of a paused schedule writes nothing, an
        apply compares again), so running it a second time never applies anything twice. A
        change still uncertain after that raises `UncertainWriteError`.
        """
        with self._lock:
            close_quietly(self._conn)
            self._conn = None
            # Settled from durable facts below, before anything is returned.
            log_event(logger, logging.WARNING, f"admin.{uncertain.kind}", action=action)
            conn = connect(self._options, f"{action}: settle")
            try:
                found = settle_durably(conn, self._durability_timeout_s, landed or _nothing)
                if found is not None:
                    return found
                with acknowledged_write(conn, action), conn.transaction():
                    return body(conn)
            except psycopg.Error as exc:
                raise wrap_error(exc, f"{action}: settle") from exc
            finally:
                close_quietly(conn)

    def _zone_rules(self, conn: psycopg.Connection[Any], action: str) -> ZoneRules:
        """Hold the recorded zone rules version FOR SHARE and return its stored rules.

        Raises:
            ZoneRulesUnavailableError: no version is recorded, or its rule data is not stored.

        """
        rows = fetch_rows(conn, "share_zone_rules", {})
        version = rows[0]["version"] if rows else None
        if version is None:
            raise ZoneRulesUnavailableError(None, zone_rules_version(), action)
        rules = self._rules.get(version)
        if rules is None:
            if stored_zone_count(conn, version) == 0:
                raise ZoneRulesUnavailableError(version, zone_rules_version(), action)
            rules = self._rules[version] = connection_zone_rules(self._current_conn, version)
        return rules

    def _stored_rules(self, conn: psycopg.Connection[Any], version: str, action: str) -> ZoneRules:
        """Return the stored rules of `version` (one a revision was computed with).

        Raises:
            ZoneRulesUnavailableError: the database stores no rule data for `version`.

        """
        rules = self._rules.get(version)
        if rules is None:
            if stored_zone_count(conn, version) == 0:
                raise ZoneRulesUnavailableError(version, zone_rules_version(), action)
            rules = self._rules[version] = connection_zone_rules(self._current_conn, version)
        return rules

    def _current_conn(self) -> psycopg.Connection[Any]:
        # Zones are read inside the transaction that computes with them (the lock is held).
        if self._conn is None:  # pragma: no cover - only called inside a transaction
            msg = "admin: zone rules read outside a transaction"
            raise DatabaseError(msg)
        return self._conn
