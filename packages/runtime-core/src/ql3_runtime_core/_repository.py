"""The repository protocols the Coordinator and its service call, and their typed outcomes.

Storage backends (ql3-cluster-postgres) implement `ScheduleRepository` (what one Coordinator
cycle needs, DESIGN §3-§6) and `ServiceRepository` (that plus what the service loop needs: the
schema check, wake-ups, the periodic cluster reads, close). They are declared here, in the lowest
layer, so the backend implementing them and the control plane calling them both depend on this
package and neither on the other's internals. Expected outcomes
(committed, raced, uncertain, quarantined, zone rules that differ) are returned values; faults and
fail-closed cases are exceptions: `ClockRegressionError` when the database clock went back,
`RepositoryUnavailableError` when the store cannot be reached before anything was sent.

A schedule row that cannot be read or decided is *quarantined* (state `invalid`, with its reason)
instead of raising: one bad row must never stop the other schedules (DESIGN §8).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError

from ._contracts import ClusterScheduleClaim  # pydantic resolves it at runtime
from ._zones import ZoneRules  # pydantic resolves it at runtime

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._commit import ClaimCommit
    from ._contracts import ClaimClusterScheduleCommand
    from ._replication import ReplicationState

__all__ = [
    "QUARANTINE_REASON_MAX_LENGTH",
    "AdmittedRun",
    "ClaimRound",
    "ClusterState",
    "CommitBatch",
    "CommitOutcome",
    "CommitStatus",
    "QuarantinedSchedule",
    "ScheduleRepository",
    "ServiceRepository",
    "ZoneRulesCheck",
    "quarantine_reason",
]

# The database keeps a reason of at most this many characters (CHECK in migration 0003).
QUARANTINE_REASON_MAX_LENGTH = 2000


class CommitStatus(StrEnum):
    """How the commit of one claim ended.

    - `COMMITTED`: the fence held; the runs, attempts, events and the new cursor are durable.
    - `RACED`: the exact claim no longer stood (expired by database time, or taken over, or the
      definition changed); nothing was written.
    - `UNCERTAIN`: COMMIT was sent but its reply was lost; resolve it from durable facts.

    A database clock that went back behind a claim is not an outcome: the commit raises
    `ClockRegressionError` and writes nothing (fail closed), and the cycle is abandoned.
    """

    COMMITTED = "committed"
    RACED = "raced"
    UNCERTAIN = "uncertain"


_OUTCOME = ConfigDict(frozen=True, extra="forbid")


class AdmittedRun(BaseModel):
    """One admission that passed the fence: the identities allocated for it and its commit time."""

    model_config = _OUTCOME

    run_id: int
    attempt_id: int
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    claim_token: UUID


class CommitOutcome(BaseModel):
    """The result of committing one claim's decision.

    `committed_at_ms` is the commit statement's own `clock_timestamp()` sample (DESIGN §5), set when
    the status is `COMMITTED`. `already_admitted` lists the decided occurrences that already had
    a run (the UNIQUE occurrence is the durable fact): the commit admitted them no second time
    and wrote nothing for them, and the rest of the decision still committed.
    """

    model_config = _OUTCOME

    schedule_id: int
    status: CommitStatus
    committed_at_ms: int | None = None
    runs: tuple[AdmittedRun, ...] = ()
    already_admitted: tuple[int, ...] = ()


class CommitBatch(BaseModel):
    """The outcomes of one commit transaction (several claims, each fenced on its own)."""

    model_config = _OUTCOME

    outcomes: tuple[CommitOutcome, ...]
    serialization_retries: int = 0


class QuarantinedSchedule(BaseModel):
    """A schedule put in state `invalid` because it could not be read or decided.

    `quarantined_at_ms` is the quarantine statement's own `clock_timestamp()` sample; the claim
    it held was released by the same statement.
    """

    model_config = _OUTCOME

    schedule_id: int
    reason: str
    quarantined_at_ms: int


class ZoneRulesCheck(BaseModel):
    """The zone rules a replica decides with against the version recorded in the store.

    The store is the zone authority: it records one version and keeps the rule data of every
    version it recorded, and a replica decides with the recorded rules loaded from it, never
    with its node's tzdata. `local_version` is the version this replica has loaded (None before
    it loaded any); `recorded_version` is None when none is recorded. They differ only while the
    replica cannot load the recorded version (`problem` says why, e.g. the store holds no rule
    data for it), and meanwhile it claims nothing.
    """

    model_config = _OUTCOME

    local_version: str | None
    recorded_version: str | None
    problem: str | None = None

    @property
    def agrees(self) -> bool:
        """True when this replica decides with the recorded zone rules."""
        return self.recorded_version is not None and self.recorded_version == self.local_version

    def describe(self) -> str:
        """One line: the versions, and why this replica cannot decide with the recorded one."""
        if self.agrees:
            return f"zone rules tzdata {self.recorded_version} (recorded, loaded)"
        recorded = self.recorded_version or "none"
        why = f": {self.problem}" if self.problem else ""
        return (
            f"zone rules: the database records tzdata {recorded}, this replica decides with"
            f" {self.local_version or 'none'}{why}"
        )


class ClusterState(BaseModel):
    """What a replica checks periodically, read in one statement.

    Its zone rules against the recorded ones, and how many schedules are quarantined.
    """

    model_config = _OUTCOME

    zone_rules: ZoneRulesCheck
    invalid_schedules: int


class ClaimRound(BaseModel):
    """What one claim statement did: readable claims, quarantined rows, the zone rules seen.

    When the zone rules disagree the statement claimed nothing (the check is part of it), so
    `claims` and `quarantined` are empty. `rules` are the zone rules the claims must be decided
    with (the recorded ones, loaded from the store); None only from a store that does not
    provide them, in which case this node's tzdata wheel decides.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    claims: tuple[ClusterScheduleClaim, ...] = ()
    quarantined: tuple[QuarantinedSchedule, ...] = ()
    zone_rules: ZoneRulesCheck
    rules: ZoneRules | None = None


def quarantine_reason(error: BaseException, context: str = "") -> str:
    """Describe why a schedule cannot be read or decided, as one bounded line for its record.

    `context` (e.g. "decision failed: ") is put first; the whole line is cut to
    `QUARANTINE_REASON_MAX_LENGTH`.
    """
    if isinstance(error, ValidationError):
        details = []
        for item in error.errors():
            field = ".".join(str(part) for part in item["loc"])
            message = item["msg"].removeprefix("Value error, ")
            details.append(
                message if not field or message.startswith(field) else f"{field}: {message}"
            )
        detail = "; ".join(details)
    else:
        detail = str(error)
    line = " ".join(f"{context}{type(error).__name__}: {detail}".split())
    if len(line) > QUARANTINE_REASON_MAX_LENGTH:
        line = line[: QUARANTINE_REASON_MAX_LENGTH - 3] + "..."
    return line


class ScheduleRepository(Protocol):
    """What the Coordinator needs from storage. Every time it uses is the store's own clock."""

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim up to `limit` due schedules in one statement observing the database clock once.

        The statement claims nothing while this replica's zone rules differ from the recorded
        ones (a store that keeps the rule data loads the recorded version and claims with it).
        A claimed row that cannot be read is quarantined (its claim released) and reported in
        `quarantined`, never raised; the round's `rules` decide the claims.
        """
        ...

    def claim_due_schedules(
        self,
        command: ClaimClusterScheduleCommand,
        limit: int,
    ) -> list[ClusterScheduleClaim]:
        """Return the readable claims of `claim_round` (for callers that need nothing else)."""
        ...

    def quarantine_claims(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine each claimed schedule with its reason, fenced on its exact claim.

        A claim that no longer stands exactly is left alone (not reported).
        """
        ...

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Commit several fenced decisions in one SERIALIZABLE transaction.

        Raises `ClockRegressionError` (nothing written) when the database clock went back, and
        `RepositoryUnavailableError` when nothing could be sent. A lost COMMIT reply yields
        `UNCERTAIN` outcomes instead of an exception.
        """
        ...

    def resolve_uncertain_commit(self, commit: ClaimCommit) -> CommitOutcome:
        """Settle an `UNCERTAIN` commit from durable facts; never admits an occurrence twice."""
        ...

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release the claims that still stand exactly (graceful stop); return how many."""
        ...

    def next_due_in_ms(self) -> int | None:
        """Return ms until the earliest due cursor by the database clock (0 if due), or None."""
        ...


class ServiceRepository(ScheduleRepository, Protocol):
    """What the Coordinator service loop needs beyond one cycle's `ScheduleRepository`.

    The PostgreSQL repository implements it; so does the in-memory fake of the control plane's
    tests, and one contract test runs against both.
    """

    def check_schema(self) -> int:
        """Return the schema version; raise when it is not the one this build expects.

        The implementation's mismatch error ends the service (ql3-cluster-postgres:
        `SchemaMismatchError`); any other `QL3Error` is a fault the service retries.
        """
        ...

    def wait_for_wakeup(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` (monotonic) for a schedule-change notification; True if one."""
        ...

    def read_cluster_state(self) -> ClusterState:
        """Read the recorded zone rules version and how many schedules are quarantined."""
        ...

    def count_overdue_schedules(self, lease_ms: int) -> int:
        """Count active schedules more than `lease_ms` + their grace behind the database clock."""
        ...

    def record_due_alerts(self) -> int:
        """Record the `missed` and `late` alerts the database clock made due; return how many.

        Recorded once each whoever asks (workers ask too, so `missed` is recorded while every
        Coordinator is down); a store without alerts records none.
        """
        ...

    def read_replication_state(self) -> ReplicationState:
        """Read the node's role, system identifier, timeline and replication mode (DESIGN §13)."""
        ...

    def close(self) -> None:
        """Close every connection; the repository may reconnect if used again."""
        ...
