"""The claim and quarantine statements of the repository (DESIGN §3, §8).

A claimed row whose definition this replica cannot read is quarantined (state `invalid`, with its
reason, claim released) by a second fenced statement, and reported in the claim round instead of
raised, so one bad row never stops the claim of the others (DESIGN §8). Zone rules come from the
database (`zones/_cache`): the claim statement refuses to claim while the version this replica
has loaded is not the recorded one; the replica then loads the recorded one and claims again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    ClaimRound,
    ClusterScheduleClaim,
    ClusterState,
    QL3Error,
    QuarantinedSchedule,
    ScheduleDefinition,
    log_event,
    quarantine_reason,
)

from ql3_cluster_postgres._bounds import check_limit
from ql3_cluster_postgres._definitions import definition_from_columns
from ql3_cluster_postgres._rows import (
    ClaimedRow,
    ClusterStateRow,
    QuarantinedRow,
    named_row,
)

from ._fences import Fence, claim_fence, claim_key, row_fence
from ._session import RepositorySession

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ClaimClusterScheduleCommand, ZoneRulesCheck

__all__ = ["ClaimStatements"]

logger = logging.getLogger(__name__)

_UNREADABLE = "unreadable schedule row: "
# Definitions read from claimed rows, kept per distinct definition (cleared when full).
_DEFINITION_MEMORY = 4096
# Each statement's row factory, built once: rows are read by column name (see _rows.py).
_CLUSTER_STATE = named_row(ClusterStateRow)
_CLAIMED = named_row(ClaimedRow)
_QUARANTINED = named_row(QuarantinedRow)


class ClaimStatements(RepositorySession):
    """Claim due schedules, and quarantine claims whose definition cannot be decided."""

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
        unreadable: list[tuple[Fence, str]] = []
        for row in claimed:
            try:
                claims.append(self._claim_from_row(row))
            except Exception as exc:  # noqa: BLE001  # whatever a row holds, the others go on
                unreadable.append((row_fence(row), quarantine_reason(exc, _UNREADABLE)))
        ctids = {row.schedule_id: row.ctid for row in claimed}
        with self._lock:
            for claim in claims:
                self._remember_ctid(claim, ctids[claim.schedule_id])
        if claims:
            log_event(
                logger,
                logging.DEBUG,
                "claim.claimed",
                claims=len(claims),
                acquired_at_ms=claims[0].claim_acquired_at_ms,
            )
        return ClaimRound(
            claims=tuple(claims),
            quarantined=self._quarantine_unreadable(unreadable),
            zone_rules=zone_rules,
            rules=self._zones.rules if zone_rules.agrees else None,
        )

    def _quarantine_unreadable(
        self, unreadable: Sequence[tuple[Fence, str]]
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
            # Their claims expire by the database clock and the next claim tries again.
            log_event(
                logger,
                logging.WARNING,
                "schedule.quarantine_failed",
                schedule_ids=[fence[0] for fence, _ in unreadable],
                error=str(exc),
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

    def quarantine_claims(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine each claimed schedule with its reason, fenced on its exact claim.

        The Coordinator calls this for a claim whose decision or commit normalization failed.
        A claim that no longer stands exactly (expired and taken over, changed by an admin) is
        left alone and not reported.
        """
        fences = [(claim_fence(claim), reason) for claim, reason in failures]
        quarantined = self._quarantine(fences)
        with self._lock:
            for claim, _ in failures:
                self._ctids.pop(claim_key(claim), None)
        return quarantined

    def _quarantine(self, failures: Sequence[tuple[Fence, str]]) -> tuple[QuarantinedSchedule, ...]:
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
