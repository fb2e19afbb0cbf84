"""The fenced PostgreSQL repository (DESIGN §3, §5, §6): claim, commit, release, resolve, hint.

Every time this module handles comes from `clock_timestamp()` inside the statement that uses it
(rule zero): the claim statement observes once and writes that observation, the commit statement
samples once and fences on it. The node's clock is never read; `time.monotonic()` only bounds
waits.

A claimed row whose definition this replica cannot read is quarantined (state `invalid`, with its
reason, claim released) by a second fenced statement, and reported in the claim round instead of
raised, so one bad row never stops the claim of the others (DESIGN §8). Zone rules come from the
database (`_zone_cache`): the claim statement refuses to claim while the version this replica has
loaded is not the recorded one, the replica then loads the recorded one and claims again, and
every commit is fenced on the version its decisions were made with.

One repository holds one working connection (autocommit for single statements, an explicit
SERIALIZABLE transaction for commits) and, when `wait_for_wakeup` is used, one LISTEN
connection. A lock serialises callers, so a repository may be shared between threads.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import psycopg
from psycopg import IsolationLevel
from psycopg.rows import RowFactory, class_row
from ql3_runtime_core import (
    ClaimCommit,
    ClaimRound,
    ClockRegressionError,
    ClusterScheduleClaim,
    ClusterState,
    CommitBatch,
    CommitOutcome,
    CommitStatus,
    QL3Error,
    QuarantinedSchedule,
    RepositoryUnavailableError,
    ScheduleDefinition,
    quarantine_reason,
)

from ql3_cluster_postgres._bounds import check_lease, check_limit
from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    ConnectionSettings,
    StatementObserver,
    close_quietly,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._definitions import definition_from_columns
from ql3_cluster_postgres._durability import (
    UncertainWriteError,
    acknowledged_write,
    durability_barrier,
)
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._replication import read_replication_state
from ql3_cluster_postgres._retry import TRANSACTION_RETRY
from ql3_cluster_postgres._rows import (
    ClaimedRow,
    ClusterStateRow,
    CommitRow,
    DueInRow,
    FoundRun,
    NowRow,
    OverdueRow,
    QuarantinedRow,
    ReleasedRow,
    ScheduleLocation,
    named_row,
)
from ql3_cluster_postgres._sql import query
from ql3_cluster_postgres.schema._migrations import check_schema_version
from ql3_cluster_postgres.zones._cache import ReplicaZoneRules

from ._outcomes import (
    StoredSchedule,
    claim_stands,
    committed_batch,
    committed_outcome,
    decision_landed,
    uncertain_batch,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ql3_runtime_core import ClaimClusterScheduleCommand, ReplicationState, ZoneRulesCheck

__all__ = ["PostgresScheduleRepository"]

logger = logging.getLogger(__name__)

# Claims taken by this process remember where their row lives; bounded so abandoned claims
# cannot grow it without limit (a forgotten ctid only costs one lookup statement).
_CTID_MEMORY = 8192
_DEFINITION_MEMORY = 4096

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
_ClaimKey = tuple[int, UUID, int]
_UNREADABLE = "unreadable schedule row: "
# The exact-claim fence of one row: id, owner, token, version, acquired at, expires at.
_Fence = tuple[int, str, UUID, int, int, int]

# Each statement's row factory, built once: rows are read by column name (see _rows.py).
_NOW = named_row(NowRow)
_DUE_IN = named_row(DueInRow)
_OVERDUE = named_row(OverdueRow)
_CLUSTER_STATE = named_row(ClusterStateRow)
_CLAIMED = named_row(ClaimedRow)
_QUARANTINED = named_row(QuarantinedRow)
_LOCATION = named_row(ScheduleLocation)
_COMMIT = named_row(CommitRow)
_FOUND_RUN = named_row(FoundRun)
_RELEASED = named_row(ReleasedRow)
# Cold path (uncertain commits only): a dataclass shaped as runtime-core's ExactClaim.
_STORED = class_row(StoredSchedule)


def _claim_key(claim: ClusterScheduleClaim) -> _ClaimKey:
    """Return what identifies one claim of one schedule version (the key of its ctid)."""
    return (claim.schedule_id, claim.claim_token, claim.version)


def _fence(claim: ClusterScheduleClaim) -> _Fence:
    return (
        claim.schedule_id,
        claim.owner_id,
        claim.claim_token,
        claim.version,
        claim.claim_acquired_at_ms,
        claim.claim_expires_at_ms,
    )


def _row_fence(row: ClaimedRow) -> _Fence:
    """Return the exact-claim fence of a claimed row, whatever else it holds."""
    return (
        row.schedule_id,
        row.owner_id,
        row.claim_token,
        row.version,
        row.claim_acquired_at_ms,
        row.claim_expires_at_ms,
    )


def _claim_params(claims: Sequence[ClusterScheduleClaim]) -> dict[str, Any]:
    """Return the exact-claim fence columns as arrays (commit and release both fence on them)."""
    return {
        "schedule_ids": [claim.schedule_id for claim in claims],
        "owner_ids": [claim.owner_id for claim in claims],
        "claim_tokens": [claim.claim_token for claim in claims],
        "versions": [claim.version for claim in claims],
        "acquired_ms": [claim.claim_acquired_at_ms for claim in claims],
        "expires_ms": [claim.claim_expires_at_ms for claim in claims],
    }


class PostgresScheduleRepository(Closing):
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
        self._ctids: OrderedDict[_ClaimKey, str] = OrderedDict()
        self._definitions: dict[tuple[Any, ...], ScheduleDefinition] = {}

    # -- life cycle ---------------------------------------------------------------------------

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
        sql = query(name)
        if self._observer is not None:
            self._observer(name, sql, params)
        return self._connection().cursor(row_factory=rows).execute(sql, params)

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

    # -- small reads ----------------------------------------------------------------------------

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

    def read_replication_state(self) -> ReplicationState:
        """Read the node's role, system identifier, timeline and replication mode (DESIGN §13)."""
        with self._lock:
            try:
                return read_replication_state(self._connection())
            except psycopg.Error as exc:
                self._discard_on_failure()
                raise wrap_error(exc, "repository: read replication state") from exc

    # -- claim (DESIGN §3) ----------------------------------------------------------------------

    @property
    def zone_rules_version(self) -> str | None:
        """The zone rules version this repository claims with (loaded from the database)."""
        return self._zones.loaded

    def read_cluster_state(self) -> ClusterState:
        """Read the recorded zone rules version and the number of quarantined schedules.

        A recorded version other than the loaded one is loaded here (when its data is stored).
        """
        (row,) = self._run(
            "read_cluster_state", {}, _CLUSTER_STATE, "repository: read cluster state"
        )
        with self._lock:
            zone_rules = self._zones.check(row.zone_rules_version)
        return ClusterState(zone_rules=zone_rules, invalid_schedules=row.invalid)

    def claim_due_schedules(
        self,
        command: ClaimClusterScheduleCommand,
        limit: int,
    ) -> list[ClusterScheduleClaim]:
        """Claim up to `limit` due schedules; the readable claims of `claim_round`."""
        return list(self.claim_round(command, limit).claims)

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim up to `limit` due schedules in one READ COMMITTED statement (DESIGN §3).

        The statement observes `clock_timestamp()` once; its parameters are the owner, token,
        lease, limit and the zone rules version this replica has loaded, never a time. It claims
        nothing when that version is not the recorded one; the recorded one is then loaded and
        the statement sent again. Claimed rows whose definition cannot be read are quarantined
        at once (their claim released) and reported, not raised. The round's `rules` (the
        loaded version, with every claimed zone read) decide the claims.
        """
        check_limit(limit)
        with self._lock:
            rows, zone_rules = self._claim_rows(command, limit)
            claimed = [row for row in rows if row.claimed]
            self._zones.preload(row.timezone for row in claimed)
        claims: list[ClusterScheduleClaim] = []
        unreadable: list[tuple[_Fence, str]] = []
        for row in claimed:
            try:
                claims.append(self._claim_from_row(row))
            except Exception as exc:  # noqa: BLE001  # whatever a row holds, the others go on
                unreadable.append((_row_fence(row), quarantine_reason(exc, _UNREADABLE)))
        ctids = {row.schedule_id: row.ctid for row in claimed}
        with self._lock:
            for claim in claims:
                self._remember_ctid(claim, ctids[claim.schedule_id])
        if claims:
            logger.debug("claimed %d schedules at %d", len(claims), claims[0].claim_acquired_at_ms)
        return ClaimRound(
            claims=tuple(claims),
            quarantined=self._quarantine_unreadable(unreadable),
            zone_rules=zone_rules,
            rules=self._zones.rules if zone_rules.agrees else None,
        )

    def _quarantine_unreadable(
        self, unreadable: Sequence[tuple[_Fence, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine the unreadable rows of a claim round; a failure never costs the others.

        The readable claims of the same round are already granted: raising here would hand the
        caller nothing, and they would sit claimed for a whole lease. So a failed quarantine is
        logged and the round goes on; its unreadable rows keep their claim until it expires
        by the database clock, and the claim after that quarantines them again.
        """
        try:
            return self._quarantine(unreadable)
        except QL3Error as exc:
            logger.warning(
                "could not quarantine %d unreadable schedules (%s); their claims expire by the"
                " database clock and the next claim tries again",
                len(unreadable),
                exc,
                extra={
                    "event": "schedule.quarantine_failed",
                    "schedule_ids": [fence[0] for fence, _ in unreadable],
                },
            )
            return ()

    def _claim_rows(
        self, command: ClaimClusterScheduleCommand, limit: int
    ) -> tuple[list[ClaimedRow], ZoneRulesCheck]:
        """Send the claim statement; when it refused another version, follow it and claim again."""
        params = {
            "owner_id": command.owner_id,
            "claim_token": command.claim_token,
            "lease_ms": command.lease_ms,
            "batch_limit": limit,
            "zone_rules_version": self._zones.loaded,
        }
        action = "repository: claim due schedules"
        rows = self._run("claim_due_schedules", params, _CLAIMED, action)
        # Every row carries the recorded version; the first one exists even when none is claimed.
        recorded = next((row.recorded_zone_rules_version for row in rows), None)
        if recorded is not None and recorded != self._zones.loaded:
            check = self._zones.check(recorded)
            if not check.agrees:
                return rows, check
            # An adopt switched the rules: claim with the recorded ones, loaded just now.
            params["zone_rules_version"] = self._zones.loaded
            rows = self._run("claim_due_schedules", params, _CLAIMED, action)
            recorded = next((row.recorded_zone_rules_version for row in rows), None)
        return rows, self._zones.check(recorded)

    def _claim_from_row(self, row: ClaimedRow) -> ClusterScheduleClaim:
        return ClusterScheduleClaim(
            schedule_id=row.schedule_id,
            task_id=row.task_id,
            version=row.version,
            owner_id=row.owner_id,
            claim_token=row.claim_token,
            claim_acquired_at_ms=row.claim_acquired_at_ms,
            claim_expires_at_ms=row.claim_expires_at_ms,
            next_due_at_ms=row.next_due_at_ms,
            definition=self._definition(row.definition_columns()),
        )

    def _definition(self, fields: tuple[Any, ...]) -> ScheduleDefinition:
        """Build (once per distinct definition) the validated definition of a schedule row."""
        cached = self._definitions.get(fields)
        if cached is None:
            if len(self._definitions) >= _DEFINITION_MEMORY:
                self._definitions.clear()
            cached = definition_from_columns(fields)
            self._definitions[fields] = cached
        return cached

    def _remember_ctid(self, claim: ClusterScheduleClaim, ctid: str) -> None:
        self._ctids[_claim_key(claim)] = ctid
        while len(self._ctids) > _CTID_MEMORY:
            self._ctids.popitem(last=False)

    # -- quarantine (DESIGN §8) -------------------------------------------------------------

    def quarantine_claims(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine each claimed schedule with its reason, fenced on its exact claim.

        The Coordinator calls this for a claim whose decision or commit normalization failed.
        A claim that no longer stands exactly (expired and taken over, changed by an admin) is
        left alone and not reported.
        """
        fences = [(_fence(claim), reason) for claim, reason in failures]
        quarantined = self._quarantine(fences)
        with self._lock:
            for claim, _ in failures:
                self._ctids.pop(_claim_key(claim), None)
        return quarantined

    def _quarantine(
        self, failures: Sequence[tuple[_Fence, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Send the fenced quarantine statement; return the schedules it quarantined."""
        if not failures:
            return ()
        columns = list(zip(*(fence for fence, _ in failures), strict=True))
        params = {
            "schedule_ids": list(columns[0]),
            "owner_ids": list(columns[1]),
            "claim_tokens": list(columns[2]),
            "versions": list(columns[3]),
            "acquired_ms": list(columns[4]),
            "expires_ms": list(columns[5]),
            "reasons": [reason for _, reason in failures],
        }
        rows = self._run(
            "quarantine_claims", params, _QUARANTINED, "repository: quarantine schedules"
        )
        return tuple(
            QuarantinedSchedule(
                schedule_id=row.schedule_id,
                reason=row.reason,
                quarantined_at_ms=row.quarantined_at_ms,
            )
            for row in sorted(rows, key=lambda row: row.schedule_id)
        )

    # -- commit (DESIGN §5, §6) -------------------------------------------------------------

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Commit several fenced decisions in one SERIALIZABLE transaction (DESIGN §5).

        Raises:
            ClockRegressionError: the database clock read earlier than a claim's acquired time;
                the transaction was rolled back, nothing was written.
            RepositoryUnavailableError: the connection failed before COMMIT was sent, or the
                serialization retries ran out. A lost COMMIT reply returns `UNCERTAIN` instead.

        """
        if not commits:
            return CommitBatch(outcomes=())
        ids = [commit.claim.schedule_id for commit in commits]
        if len(set(ids)) != len(ids):
            msg = f"commits: a schedule appears twice in one batch: {sorted(ids)}"
            raise ValueError(msg)
        versions = sorted({commit.zone_rules_version for commit in commits})
        if len(versions) > 1:
            msg = f"commits: one batch decided under several zone rules versions: {versions}"
            raise ValueError(msg)
        with self._lock:
            params = self._commit_params(commits)
            try:
                return self._commit_with_retries(commits, params)
            finally:
                for commit in commits:
                    self._ctids.pop(_claim_key(commit.claim), None)

    def _commit_params(self, commits: Sequence[ClaimCommit]) -> dict[str, Any]:
        claims = [commit.claim for commit in commits]
        ctids = self._ctids_for(claims)
        occurrence_ids: list[int] = []
        occurrence_ms: list[int] = []
        for commit in commits:
            for occurrence in commit.decision.occurrences:
                occurrence_ids.append(commit.claim.schedule_id)
                occurrence_ms.append(occurrence)
        # Normalization checked each range; only decisions that skipped something get a record.
        skipping = [commit for commit in commits if commit.decision.skipped > 0]
        return {
            **_claim_params(claims),
            # The version the decisions were made with: the statement writes nothing when it is
            # no longer the recorded one (an adopt came first).
            "zone_rules_version": commits[0].zone_rules_version,
            "row_ctids": [ctids.get(claim.schedule_id, "(0,0)") for claim in claims],
            "next_due_ms": [commit.decision.next_due_at_ms for commit in commits],
            "states": [commit.decision.state.value for commit in commits],
            "occurrence_schedule_ids": occurrence_ids,
            "occurrence_ms": occurrence_ms,
            "skip_schedule_ids": [commit.claim.schedule_id for commit in skipping],
            "skip_first_ms": [commit.decision.skipped_first_ms for commit in skipping],
            "skip_last_ms": [commit.decision.skipped_last_ms for commit in skipping],
            "skip_counts": [commit.decision.skipped for commit in skipping],
            "skip_policies": [commit.claim.definition.misfire_policy.value for commit in skipping],
        }

    def _ctids_for(self, claims: Sequence[ClusterScheduleClaim]) -> dict[int, str]:
        """Where each claimed row lives: remembered from the claim, else looked up now."""
        found: dict[int, str] = {}
        missing: list[int] = []
        for claim in claims:
            ctid = self._ctids.get(_claim_key(claim))
            if ctid is None:
                missing.append(claim.schedule_id)
            else:
                found[claim.schedule_id] = ctid
        if missing:
            rows = self._run(
                "find_schedule_ctids",
                {"schedule_ids": missing},
                _LOCATION,
                "repository: locate schedules",
            )
            found.update({row.schedule_id: row.ctid for row in rows})
        return found

    def _commit_with_retries(
        self, commits: Sequence[ClaimCommit], params: Mapping[str, Any]
    ) -> CommitBatch:
        """Commit, rerunning the whole transaction on the package's retryable SQLSTATEs.

        Every try sends the statement again, so each samples the database clock afresh.
        """
        tries = [0]

        def attempt(retries: int) -> CommitBatch:
            tries[0] = retries
            try:
                return self._commit_once(commits, params, retries)
            except psycopg.Error:
                self._discard_on_failure()
                raise

        try:
            return self._commit_retry.call(attempt)
        except psycopg.Error as exc:
            action = f"repository: commit (after {tries[0]} serialization retries)"
            raise wrap_error(exc, action) from exc

    def _commit_once(
        self, commits: Sequence[ClaimCommit], params: Mapping[str, Any], retries: int
    ) -> CommitBatch:
        conn = self._connection()
        conn.autocommit = False
        conn.isolation_level = IsolationLevel.SERIALIZABLE
        row = self._send("commit_decisions", params, _COMMIT).fetchone()
        if row is None:  # pragma: no cover - the statement always returns one row
            msg = "commit: the commit statement returned no row"
            raise RepositoryUnavailableError(msg)
        regression = row.regression
        if regression is not None:
            conn.rollback()
            conn.autocommit = True
            regressed_id, regressed_acquired_ms = regression
            raise ClockRegressionError(regressed_id, row.observed_at_ms, regressed_acquired_ms)
        fenced = set(row.fenced_schedule_ids)
        try:
            with acknowledged_write(conn, "repository: commit"):
                conn.commit()
        except UncertainWriteError as uncertain:
            # reply_lost: COMMIT was sent and its reply lost, so the fenced claims may or may not
            # be durable. unsafe_ack: committed on this server only (the wait for the synchronous
            # standby was cancelled), so a failover may lose it. Both are settled the same way,
            # from durable facts; the connection goes so the resolution reconnects to whichever
            # server leads now.
            self._drop_connection()
            how = "reply lost" if uncertain.kind == "reply_lost" else "acknowledged with a WARNING"
            logger.warning(
                "commit %s (%s); %d fenced claims are uncertain",
                how,
                uncertain.detail,
                len(fenced),
                extra={"event": f"commit.{uncertain.kind}", "fenced": len(fenced)},
            )
            return uncertain_batch(commits, fenced, retries)
        conn.autocommit = True
        return committed_batch(commits, row, retries)

    def _drop_connection(self) -> None:
        close_quietly(self._conn)
        self._conn = None

    # -- uncertainty (DESIGN §6) ------------------------------------------------------------

    def resolve_uncertain_commit(self, commit: ClaimCommit) -> CommitOutcome:
        """Settle an `UNCERTAIN` commit from durable facts; never admits an occurrence twice.

        The exact claim still standing means the commit did not land: commit it again through
        the normal fenced path. Otherwise the runs (or, for a decision admitting nothing, the
        schedule row) show whether it landed; if neither, it raced.

        Facts count only once they are durable: a durability barrier (a commit the synchronous
        standby must acknowledge cleanly) runs first on the same connection, so a commit kept
        only by an isolated old primary is never settled as admitted.

        Raises:
            RepositoryUnavailableError: the barrier was not acknowledged cleanly (or the server
                is unreachable); the commit stays uncertain, settle it later.

        """
        claim = commit.claim
        with self._lock:
            self._durability_barrier()
            state = self._schedule_row(claim.schedule_id)
            if state is not None and claim_stands(claim, state):
                outcome = self.commit_decisions([commit]).outcomes[0]
                if outcome.status is not CommitStatus.RACED:
                    return outcome
                state = self._schedule_row(claim.schedule_id)
            landed = self._landed_outcome(commit, state)
        return landed or CommitOutcome(schedule_id=claim.schedule_id, status=CommitStatus.RACED)

    def _durability_barrier(self) -> None:
        try:
            durability_barrier(self._connection(), self._durability_timeout_s)
        except RepositoryUnavailableError:
            self._drop_connection()  # reconnect next time: another server may lead by then
            raise
        except psycopg.Error as exc:
            self._discard_on_failure()
            raise wrap_error(exc, "repository: durability barrier") from exc

    def _schedule_row(self, schedule_id: int) -> StoredSchedule | None:
        """Read the schedule's fencing columns by name (None when the row is gone)."""
        rows = self._run(
            "read_schedule_row", {"schedule_id": schedule_id}, _STORED, "repository: read schedule"
        )
        return next(iter(rows), None)

    def _landed_outcome(
        self, commit: ClaimCommit, state: StoredSchedule | None
    ) -> CommitOutcome | None:
        occurrences = list(commit.decision.occurrences)
        if not occurrences:
            return decision_landed(commit, state)
        rows = self._run(
            "find_committed_runs",
            {"schedule_id": commit.claim.schedule_id, "occurrence_ms": occurrences},
            _FOUND_RUN,
            "repository: find committed runs",
        )
        return committed_outcome(commit, rows, state)

    # -- release (DESIGN §5) ----------------------------------------------------------------

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release claims that still stand exactly, at database time; returns how many."""
        if not claims:
            return 0
        (row,) = self._run(
            "release_claims", _claim_params(claims), _RELEASED, "repository: release claims"
        )
        with self._lock:
            for claim in claims:
                self._ctids.pop(_claim_key(claim), None)
        return row.released

    # -- wake-ups ---------------------------------------------------------------------------

    def wait_for_wakeup(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` (monotonic) for `ql3_schedule_changed`; True if notified."""
        with self._lock:
            conn = reuse_or_connect(self._listen_conn, self._options, "repository: listen connect")
            if conn is not self._listen_conn:
                self._listen_conn = conn
                try:
                    conn.execute(query("listen_schedule_changed"))
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
