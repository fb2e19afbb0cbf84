"""One repository's connections, lock and memory, under every statement it sends.

The claim and commit statements (`_claims`, `_commits`) and the public class build on this
session: one working connection (autocommit for single statements, an explicit SERIALIZABLE
transaction for commits), one LISTEN connection, one lock so the repository may be shared
between threads, and where the rows of this process's claims live (ctid memory).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    ConnectionSettings,
    StatementObserver,
    close_quietly,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._retry import TRANSACTION_RETRY
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.zones import ReplicaZoneRules

from ._fences import ClaimKey, claim_key

if TYPE_CHECKING:
    from collections.abc import Mapping

    from psycopg.rows import RowFactory
    from ql3_runtime_core import (
        ClusterScheduleClaim,
        ScheduleDefinition,
    )


__all__ = ["RepositorySession"]


# Claims taken by this process remember where their row lives; bounded so abandoned claims
# cannot grow it without limit (a forgotten ctid only costs one lookup statement).
_CTID_MEMORY = 8192

# Every statement here has an index or TID path. A sequential scan under SERIALIZABLE takes a
# relation-wide SIREAD lock, so on a small table (where the planner prefers it) replicas
# committing different schedules would abort each other; the commit must use its TID scan.
# The plans depend on no parameter value (the claim's time bound is its own observation, not a
# parameter), so prepared statements keep their generic plan instead of replanning per call.
# JIT off: `enable_seqscan=off` adds PostgreSQL's disable cost (1e10) to the one
# sequential scan left (the one-row `ql3.zone_rules`), which lifts a claim's estimated cost far
# above `jit_above_cost`, so a server with the default `jit = on` compiled every claim with LLVM:
# 220-360 ms per statement on a Patroni member (perf: llvm:: frames in the backend) against ~1 ms.
# Nothing QL3 sends runs long enough for JIT to pay.
_SESSION_SETTINGS = {
    "enable_seqscan": "off",
    "plan_cache_mode": "force_generic_plan",
    "jit": "off",
}

_T = TypeVar("_T")


class RepositorySession(Closing):
    """The state every repository statement shares; built by `PostgresScheduleRepository`."""

    def __init__(
        self,
        conninfo: str,
        *,
        connection: ConnectionSettings | None = None,
        max_serialization_retries: int = 8,
        lock_timeout_ms: int = 5_000,
        idle_in_transaction_timeout_ms: int = 10_000,
        statement_observer: StatementObserver | None = None,
        durability_timeout_ms: int = 2_000,
    ) -> None:
        if max_serialization_retries < 0:
            msg = f"max_serialization_retries: must be >= 0, got {max_serialization_retries}"
            raise ValueError(msg)
        if durability_timeout_ms <= 0:
            msg = f"durability_timeout_ms: must be > 0, got {durability_timeout_ms}"
            raise ValueError(msg)
        self._durability_timeout_s = durability_timeout_ms / 1000
        self._options = ConnectionOptions(
            conninfo,
            connection,
            server_settings={
                **_SESSION_SETTINGS,
                "lock_timeout": str(lock_timeout_ms),
                "idle_in_transaction_session_timeout": str(idle_in_transaction_timeout_ms),
            },
        )
        # The package's one transaction retry policy, with this repository's bound.
        self._commit_retry = TRANSACTION_RETRY.with_retries(max_serialization_retries)
        self._observer = statement_observer
        self._lock = threading.RLock()
        self._zones = ReplicaZoneRules(self._run)
        self._conn: psycopg.Connection[Any] | None = None
        self._listen_conn: psycopg.Connection[Any] | None = None
        self._ctids: OrderedDict[ClaimKey, str] = OrderedDict()
        self._definitions: dict[tuple[Any, ...], ScheduleDefinition] = {}

    def close(self) -> None:
        """Close both connections; the repository reconnects if used again."""
        with self._lock:
            close_quietly(self._conn)
            close_quietly(self._listen_conn)
            self._conn = None
            self._listen_conn = None

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn = reuse_or_connect(self._conn, self._options, "repository: connect")
        return conn

    def _discard_on_failure(self) -> None:
        """Drop a connection left broken or mid-transaction by a failed call."""
        conn = self._conn
        if conn is None:
            return
        if conn.broken or conn.closed:
            close_quietly(conn)
            self._conn = None
            return
        try:
            conn.rollback()
            conn.autocommit = True
        except psycopg.Error:
            close_quietly(conn)
            self._conn = None

    def _send(
        self, name: str, params: Mapping[str, Any], rows: RowFactory[_T]
    ) -> psycopg.Cursor[_T]:
        """Send statement `name` on the working connection; its rows come back as `rows` makes."""
        return send(self._connection(), name, params, rows=rows, observer=self._observer)

    def _run(
        self, name: str, params: Mapping[str, Any], rows: RowFactory[_T], action: str
    ) -> list[_T]:
        """Send one autocommit statement and return its rows; psycopg errors are wrapped."""
        with self._lock:
            try:
                return self._send(name, params, rows).fetchall()
            except psycopg.Error as exc:
                self._discard_on_failure()
                raise wrap_error(exc, action) from exc

    def _drop_connection(self) -> None:
        close_quietly(self._conn)
        self._conn = None

    def _remember_ctid(self, claim: ClusterScheduleClaim, ctid: str) -> None:
        self._ctids[claim_key(claim)] = ctid
        while len(self._ctids) > _CTID_MEMORY:
            self._ctids.popitem(last=False)
