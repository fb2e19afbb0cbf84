"""An in-memory `ServiceRepository` for unit tests of Coordinator cycles and the service loop.

It keeps schedules as Python objects and a *fake database clock* the test moves by hand (no
node clock, rule zero). It mirrors the repository semantics the Coordinator relies on: claims
take due, unclaimed-or-expired active rows and stamp them with the fake clock; commits are
fenced on the exact claim and expiry; a lost reply yields UNCERTAIN after the commit landed.
A claimed row whose definition does not validate is quarantined (state invalid, claim released)
and reported, like the PostgreSQL claim. Zone rules as in PostgreSQL: the replica decides with
the recorded version once it could load it (`zone_rules_stored` holds the versions whose data is
there; decisions use this node's wheel, the fake has no data of its own); nothing is claimed
while it cannot. It never parses SQL.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence  # noqa: TC003  # dataclass fields resolve at runtime
from dataclasses import dataclass, field

from fake_rows import FakeSchedule, ScheduleRows, fake_node
from ql3_runtime_core import (
    AdmittedRun,
    ClaimClusterScheduleCommand,
    ClaimCommit,
    ClaimRound,
    ClockRegressionError,
    ClusterScheduleClaim,
    ClusterState,
    CommitBatch,
    CommitOutcome,
    CommitStatus,
    QuarantinedSchedule,
    ReplicationState,
    RepositoryUnavailableError,
    ScheduleDefinition,
    ScheduleState,
    ZoneRulesCheck,
    quarantine_reason,
    same_claim,
    same_grant,
)


@dataclass
class FakeRepository(ScheduleRows):
    """The fake store; `now_ms` is its database clock, advanced by `tick_ms` per statement."""

    now_ms: int = 1_700_000_000_000
    tick_ms: int = 1
    schedules: dict[int, FakeSchedule] = field(default_factory=dict)
    runs: list[AdmittedRun] = field(default_factory=list)
    notifications: list[int] = field(default_factory=list)
    lose_next_reply: bool = False
    fail_next_commit: BaseException | None = None
    before_commit: Callable[[FakeRepository], None] | None = None
    resolve_failures: int = 0
    calls: list[str] = field(default_factory=list)
    closed: bool = False
    alert_checks: int = 0
    zone_rules_recorded: str | None = "2026.1"
    zone_rules_stored: set[str] = field(default_factory=lambda: {"2026.1"})
    zone_rules_loaded: str | None = None
    replication: ReplicationState = field(default_factory=fake_node)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _observe(self) -> int:
        self.now_ms += self.tick_ms
        return self.now_ms

    # -- ScheduleRepository -------------------------------------------------------------------

    def _zone_rules(self) -> ZoneRulesCheck:
        recorded = self.zone_rules_recorded
        if recorded is not None and recorded in self.zone_rules_stored:
            self.zone_rules_loaded = recorded
        agrees = recorded is not None and recorded == self.zone_rules_loaded
        return ZoneRulesCheck(
            local_version=self.zone_rules_loaded,
            recorded_version=recorded,
            problem=None if agrees else f"the database holds no rule data for tzdata {recorded}",
        )

    def claim_due_schedules(
        self, command: ClaimClusterScheduleCommand, limit: int
    ) -> list[ClusterScheduleClaim]:
        """Return the readable claims of `claim_round`."""
        return list(self.claim_round(command, limit).claims)

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim due rows (none while zone rules differ); quarantine those that do not read."""
        zone_rules = self._zone_rules()
        if not zone_rules.agrees:
            self.calls.append("claim")
            self._observe()
            return ClaimRound(zone_rules=zone_rules)
        claims = self._claim_due(command, limit)
        readable: list[ClusterScheduleClaim] = []
        unreadable: list[tuple[ClusterScheduleClaim, str]] = []
        for claim in claims:
            try:
                ScheduleDefinition.model_validate(dict(claim.definition))
            except Exception as exc:  # noqa: BLE001  # as the PostgreSQL claim: any failure
                unreadable.append((claim, quarantine_reason(exc, "unreadable schedule row: ")))
                continue
            readable.append(claim)
        quarantined = self._quarantine(unreadable) if unreadable else ()
        return ClaimRound(claims=tuple(readable), quarantined=quarantined, zone_rules=zone_rules)

    def quarantine_claims(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine exact claims with their reasons at one fake database time."""
        self.calls.append("quarantine")
        return self._quarantine(failures)

    def _quarantine(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        obs = self._observe()
        done = []
        for claim, reason in failures:
            if not self._stands(claim) or self.schedules[claim.schedule_id].updated_at_ms > obs:
                continue
            row = self.schedules[claim.schedule_id]
            row.state = ScheduleState.INVALID
            row.invalid_reason, row.invalidated_at_ms = reason, obs
            row.claim_owner_id = row.claim_token = row.claim_expires_at_ms = None
            row.version += 1
            row.updated_at_ms = obs
            done.append(
                QuarantinedSchedule(
                    schedule_id=claim.schedule_id, reason=reason, quarantined_at_ms=obs
                )
            )
        return tuple(done)

    def _claim_due(
        self, command: ClaimClusterScheduleCommand, limit: int
    ) -> list[ClusterScheduleClaim]:
        """Claim up to `limit` due rows with one observation of the fake clock."""
        self.calls.append("claim")
        obs = self._observe()
        claims: list[ClusterScheduleClaim] = []
        for row in sorted(
            self.schedules.values(), key=lambda r: (r.next_due_at_ms or 0, r.schedule_id)
        ):
            if len(claims) >= limit:
                break
            if row.state is not ScheduleState.ACTIVE or row.next_due_at_ms is None:
                continue
            if row.next_due_at_ms > obs or row.updated_at_ms > obs:
                continue
            if row.claim_expires_at_ms is not None and row.claim_expires_at_ms > obs:
                continue
            row.version += 1
            row.updated_at_ms = obs
            row.claim_owner_id = command.owner_id
            row.claim_token = command.claim_token
            row.claim_expires_at_ms = obs + command.lease_ms
            claims.append(self._claim(row))
        return claims

    def _claim(self, row: FakeSchedule) -> ClusterScheduleClaim:
        assert row.claim_owner_id is not None
        assert row.claim_token is not None
        assert row.claim_expires_at_ms is not None
        assert row.next_due_at_ms is not None
        return ClusterScheduleClaim(
            schedule_id=row.schedule_id,
            task_id=row.task_id,
            version=row.version,
            owner_id=row.claim_owner_id,
            claim_token=row.claim_token,
            claim_acquired_at_ms=row.updated_at_ms,
            claim_expires_at_ms=row.claim_expires_at_ms,
            next_due_at_ms=row.next_due_at_ms,
            definition=row.definition,
        )

    def _stands(self, claim: ClusterScheduleClaim) -> bool:
        """Tell whether the exact claim (DESIGN §5) still stands on its row, by `same_claim`."""
        return same_claim(claim, self.schedules[claim.schedule_id])

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Fenced commit of several claims with one observation; nothing written on regression."""
        self.calls.append("commit")
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            hook(self)
        if self.fail_next_commit is not None:
            error, self.fail_next_commit = self.fail_next_commit, None
            raise error
        obs = self._observe()
        for commit in commits:
            if obs < commit.claim.claim_acquired_at_ms:
                raise ClockRegressionError(
                    commit.claim.schedule_id, obs, commit.claim.claim_acquired_at_ms
                )
        outcomes = tuple(self._apply(commit, obs) for commit in commits)
        if self.lose_next_reply:
            self.lose_next_reply = False
            outcomes = tuple(
                CommitOutcome(schedule_id=o.schedule_id, status=CommitStatus.UNCERTAIN)
                for o in outcomes
            )
        return CommitBatch(outcomes=outcomes)

    def _apply(self, commit: ClaimCommit, obs: int) -> CommitOutcome:
        claim = commit.claim
        row = self.schedules[claim.schedule_id]
        if not self._stands(claim) or obs >= claim.claim_expires_at_ms:
            return CommitOutcome(schedule_id=claim.schedule_id, status=CommitStatus.RACED)
        runs = []
        taken = {run.scheduled_for_ms for run in self.runs if run.schedule_id == claim.schedule_id}
        already = tuple(t for t in commit.decision.occurrences if t in taken)
        for occurrence in commit.decision.occurrences:
            if occurrence in taken:
                continue  # UNIQUE (schedule, occurrence): settled by the run that exists
            run_id = next(self._ids)
            run = AdmittedRun(
                run_id=run_id,
                attempt_id=run_id,
                schedule_id=claim.schedule_id,
                task_id=claim.task_id,
                scheduled_for_ms=occurrence,
                created_at_ms=obs,
                owner_id=claim.owner_id,
                claim_token=claim.claim_token,
            )
            runs.append(run)
            self.runs.append(run)
            self.notifications.append(run_id)
        row.next_due_at_ms = commit.decision.next_due_at_ms
        row.state = commit.decision.state
        row.version += 1
        row.updated_at_ms = obs
        row.claim_owner_id = row.claim_token = row.claim_expires_at_ms = None
        return CommitOutcome(
            schedule_id=claim.schedule_id,
            status=CommitStatus.COMMITTED,
            committed_at_ms=obs,
            runs=tuple(runs),
            already_admitted=already,
        )

    def resolve_uncertain_commit(self, commit: ClaimCommit) -> CommitOutcome:
        """Settle from facts: runs exist -> committed; claim stands -> commit; else raced."""
        self.calls.append("resolve")
        if self.resolve_failures > 0:
            self.resolve_failures -= 1
            msg = "fake: connection refused"
            raise RepositoryUnavailableError(msg)
        claim = commit.claim
        landed = tuple(
            run
            for run in self.runs
            if run.schedule_id == claim.schedule_id and run.claim_token == claim.claim_token
        )
        if landed:
            return CommitOutcome(
                schedule_id=claim.schedule_id,
                status=CommitStatus.COMMITTED,
                committed_at_ms=landed[0].created_at_ms,
                runs=landed,
            )
        if self._stands(claim):
            return self.commit_decisions([commit]).outcomes[0]
        return CommitOutcome(schedule_id=claim.schedule_id, status=CommitStatus.RACED)

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release claims whose grant stands (`same_grant`: any version) at the fake time."""
        self.calls.append("release")
        obs = self._observe()
        released = 0
        for claim in claims:
            row = self.schedules[claim.schedule_id]
            if same_grant(claim, row) and row.updated_at_ms <= obs:
                row.claim_owner_id = row.claim_token = row.claim_expires_at_ms = None
                row.version += 1
                row.updated_at_ms = obs
                released += 1
        return released

    def next_due_in_ms(self) -> int | None:
        """Milliseconds until the earliest active cursor by the fake clock."""
        dues = [
            row.next_due_at_ms
            for row in self.schedules.values()
            if row.state is ScheduleState.ACTIVE and row.next_due_at_ms is not None
        ]
        return None if not dues else max(min(dues) - self.now_ms, 0)

    # -- service extras -------------------------------------------------------------------------

    def read_cluster_state(self) -> ClusterState:
        """Report the zone rules comparison and how many rows are quarantined."""
        self.calls.append("cluster_state")
        invalid = sum(1 for row in self.schedules.values() if row.state is ScheduleState.INVALID)
        return ClusterState(zone_rules=self._zone_rules(), invalid_schedules=invalid)

    def record_due_alerts(self) -> int:
        """Record no alert: alerts are rows of the PostgreSQL schema (migration 0013)."""
        self.alert_checks += 1
        return 0

    def count_overdue_schedules(self, lease_ms: int) -> int:
        """Count active rows whose cursor is more than lease + grace behind the fake clock."""
        return sum(
            1
            for row in self.schedules.values()
            if row.state is ScheduleState.ACTIVE
            and row.next_due_at_ms is not None
            and self.now_ms - row.next_due_at_ms > lease_ms + row.definition.misfire_grace_ms
        )

    def read_replication_state(self) -> ReplicationState:
        """Report the node the test set (`replication`, default a lone primary)."""
        self.calls.append("replication_state")
        return self.replication

    def check_schema(self) -> int:
        """Report the expected schema version: the fake always matches."""
        return 1

    def wait_for_wakeup(self, timeout_s: float) -> bool:
        """Advance the fake clock by the wait instead of sleeping."""
        self.now_ms += int(timeout_s * 1000)
        return False

    def close(self) -> None:
        """Mark closed."""
        self.closed = True
