"""The commit, settle and release statements of the repository (DESIGN §5, §6).

Every commit is fenced on the exact claim and on the zone rules version its decisions were
made with; a commit whose reply was lost (or acknowledged only with the sync-rep WARNING) is
`UNCERTAIN` and settled later from durable facts, after a durability barrier.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import IsolationLevel
from psycopg.rows import class_row
from ql3_runtime_core import (
    ClaimCommit,
    ClockRegressionError,
    ClusterScheduleClaim,
    CommitBatch,
    CommitOutcome,
    CommitStatus,
    RepositoryUnavailableError,
    log_event,
)

from ql3_cluster_postgres._connect import (
    wrap_error,
)
from ql3_cluster_postgres._durability import (
    UncertainWriteError,
    acknowledged_write,
    durability_barrier,
)
from ql3_cluster_postgres._rows import (
    CommitRow,
    FoundRun,
    ReleasedRow,
    ScheduleLocation,
    named_row,
)

from ._arrays import bigint_array, tid_array
from ._fences import claim_key, claim_params
from ._outcomes import (
    StoredSchedule,
    claim_stands,
    committed_batch,
    committed_outcome,
    decision_landed,
    uncertain_batch,
)
from ._session import RepositorySession

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


__all__ = ["CommitStatements"]

logger = logging.getLogger(__name__)

# Each statement's row factory, built once: rows are read by column name (see _rows.py).
_LOCATION = named_row(ScheduleLocation)
_COMMIT = named_row(CommitRow)
_FOUND_RUN = named_row(FoundRun)
_RELEASED = named_row(ReleasedRow)
# Cold path (uncertain commits only): a dataclass shaped as runtime-core's ExactClaim.
_STORED = class_row(StoredSchedule)


class CommitStatements(RepositorySession):
    """Commit fenced decisions, settle an uncertain commit, release claims."""

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
                    self._ctids.pop(claim_key(commit.claim), None)

    def _commit_params(self, commits: Sequence[ClaimCommit]) -> dict[str, Any]:
        """Bind a batch: integers and ctids as array literals (`_arrays`), text as lists."""
        claims = [commit.claim for commit in commits]
        ctids = self._ctids_for(claims)
        occurrence_ids: list[int] = []
        occurrence_ms: list[int] = []
        for commit in commits:
            occurrences = commit.decision.occurrences
            occurrence_ids += [commit.claim.schedule_id] * len(occurrences)
            occurrence_ms += occurrences
        # Normalization checked each range; only decisions that skipped something get a record.
        skipping = [commit for commit in commits if commit.decision.skipped > 0]
        return {
            "schedule_ids": bigint_array([claim.schedule_id for claim in claims]),
            "owner_ids": [claim.owner_id for claim in claims],
            "claim_tokens": [claim.claim_token for claim in claims],
            "versions": bigint_array([claim.version for claim in claims]),
            "acquired_ms": bigint_array([claim.claim_acquired_at_ms for claim in claims]),
            "expires_ms": bigint_array([claim.claim_expires_at_ms for claim in claims]),
            # The version the decisions were made with: the statement writes nothing when it is
            # no longer the recorded one (an adopt came first).
            "zone_rules_version": commits[0].zone_rules_version,
            # (0,0) is no row's ctid: a claim whose row was not found fails its fence, never
            # lands on another row.
            "row_ctids": tid_array([ctids.get(claim.schedule_id, "(0,0)") for claim in claims]),
            "next_due_ms": bigint_array([commit.decision.next_due_at_ms for commit in commits]),
            "states": [commit.decision.state.value for commit in commits],
            "occurrence_schedule_ids": bigint_array(occurrence_ids),
            "occurrence_ms": bigint_array(occurrence_ms),
            "skip_schedule_ids": bigint_array([commit.claim.schedule_id for commit in skipping]),
            "skip_first_ms": bigint_array(
                [commit.decision.skipped_first_ms for commit in skipping]
            ),
            "skip_last_ms": bigint_array([commit.decision.skipped_last_ms for commit in skipping]),
            "skip_counts": bigint_array([commit.decision.skipped for commit in skipping]),
            "skip_policies": [commit.claim.definition.misfire_policy.value for commit in skipping],
        }

    def _ctids_for(self, claims: Sequence[ClusterScheduleClaim]) -> dict[int, str]:
        """Where each claimed row lives: remembered from the claim, else looked up now."""
        found: dict[int, str] = {}
        missing: list[int] = []
        for claim in claims:
            ctid = self._ctids.get(claim_key(claim))
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
        # The statement samples the database clock once; earlier than a claim's acquired time
        # means the clock stepped back, and no decision may be written on a clock that
        # regressed (rule zero): roll back and say so instead of committing.
        regression = row.regression
        if regression is not None:
            conn.rollback()
            conn.autocommit = True
            regressed_id, regressed_acquired_ms = regression
            raise ClockRegressionError(regressed_id, row.observed_at_ms, regressed_acquired_ms)
        # Only the claims that passed the exact-claim fence were written; the others raced.
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
            log_event(
                logger,
                logging.WARNING,
                f"commit.{uncertain.kind}",
                fenced=len(fenced),
                detail=uncertain.detail,
            )
            return uncertain_batch(commits, fenced, retries)
        conn.autocommit = True
        return committed_batch(commits, row, retries)

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

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release claims that still stand exactly, at database time; returns how many."""
        if not claims:
            return 0
        (row,) = self._run(
            "release_claims", claim_params(claims), _RELEASED, "repository: release claims"
        )
        with self._lock:
            for claim in claims:
                self._ctids.pop(claim_key(claim), None)
        return row.released
