"""QL3 runtime core: pure scheduling logic that reads no clock (rule zero).

The public surface is exactly `__all__`; implementation modules are private.
"""

from __future__ import annotations

from importlib.metadata import version as _version

from ._commit import ClaimCommit, checked_commit
from ._contracts import (
    LEASE_MS_DEFAULT,
    LEASE_MS_MAX,
    LEASE_MS_MIN,
    OWNER_ID_MAX_LENGTH,
    ClaimClusterScheduleCommand,
    ClusterScheduleClaim,
    ExactClaim,
    MisfirePolicy,
    ScheduleDefinition,
    ScheduleState,
    same_claim,
)
from ._cron import (
    count_occurrences_ms,
    is_interval_like,
    latest_occurrence_ms,
    next_occurrence_ms,
    occurrences_after_ms,
    preview_occurrences,
    validate_cron_expression,
)
from ._decision import ScheduleDecision, resolve_cluster_schedule_decision
from ._errors import (
    ClockRegressionError,
    InvalidArgumentError,
    InvalidCronError,
    InvalidDecisionError,
    QL3Error,
    RepositoryUnavailableError,
    UnknownTimezoneError,
)
from ._execution import (
    COMMAND_MAX_LENGTH,
    MAX_ATTEMPTS_DEFAULT,
    MAX_ATTEMPTS_MAX,
    OUTPUT_TAIL_MAX_CHARS,
    RETRY_BACKOFF_MS_DEFAULT,
    RETRY_BACKOFF_MS_MAX,
    TIMEOUT_MS_DEFAULT,
    TIMEOUT_MS_MAX,
    TIMEOUT_MS_MIN,
    AbandonedAttempt,
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    FinishedAttempt,
    TakenAttempt,
    TaskExecution,
    WorkerRepository,
)
from ._limits import (
    CRON_MAX_LENGTH,
    EPOCH_MS_MAX,
    EPOCH_MS_MIN,
    MISFIRE_GRACE_MS_MAX,
    PREVIEW_COUNT_MAX,
)
from ._payload import PAYLOAD_MAX_BYTES, payload_text
from ._replication import ReplicationMode, ReplicationState
from ._repository import (
    QUARANTINE_REASON_MAX_LENGTH,
    AdmittedRun,
    ClaimRound,
    ClusterState,
    CommitBatch,
    CommitOutcome,
    CommitStatus,
    QuarantinedSchedule,
    ScheduleRepository,
    ServiceRepository,
    ZoneRulesCheck,
    quarantine_reason,
)
from ._summary import CycleSummary, summarize_cycle
from ._zones import load_timezone, zone_rules_version

__version__ = _version("ql3-runtime-core")

__all__ = [
    "COMMAND_MAX_LENGTH",
    "CRON_MAX_LENGTH",
    "EPOCH_MS_MAX",
    "EPOCH_MS_MIN",
    "LEASE_MS_DEFAULT",
    "LEASE_MS_MAX",
    "LEASE_MS_MIN",
    "MAX_ATTEMPTS_DEFAULT",
    "MAX_ATTEMPTS_MAX",
    "MISFIRE_GRACE_MS_MAX",
    "OUTPUT_TAIL_MAX_CHARS",
    "OWNER_ID_MAX_LENGTH",
    "PAYLOAD_MAX_BYTES",
    "PREVIEW_COUNT_MAX",
    "QUARANTINE_REASON_MAX_LENGTH",
    "RETRY_BACKOFF_MS_DEFAULT",
    "RETRY_BACKOFF_MS_MAX",
    "TIMEOUT_MS_DEFAULT",
    "TIMEOUT_MS_MAX",
    "TIMEOUT_MS_MIN",
    "AbandonedAttempt",
    "AdmittedRun",
    "AttemptOutcome",
    "AttemptResult",
    "AttemptState",
    "ClaimClusterScheduleCommand",
    "ClaimCommit",
    "ClaimRound",
    "ClockRegressionError",
    "ClusterScheduleClaim",
    "ClusterState",
    "CommitBatch",
    "CommitOutcome",
    "CommitStatus",
    "CycleSummary",
    "ExactClaim",
    "FinishedAttempt",
    "InvalidArgumentError",
    "InvalidCronError",
    "InvalidDecisionError",
    "MisfirePolicy",
    "QL3Error",
    "QuarantinedSchedule",
    "ReplicationMode",
    "ReplicationState",
    "RepositoryUnavailableError",
    "ScheduleDecision",
    "ScheduleDefinition",
    "ScheduleRepository",
    "ScheduleState",
    "ServiceRepository",
    "TakenAttempt",
    "TaskExecution",
    "UnknownTimezoneError",
    "WorkerRepository",
    "ZoneRulesCheck",
    "__version__",
    "checked_commit",
    "count_occurrences_ms",
    "is_interval_like",
    "latest_occurrence_ms",
    "load_timezone",
    "next_occurrence_ms",
    "occurrences_after_ms",
    "payload_text",
    "preview_occurrences",
    "quarantine_reason",
    "resolve_cluster_schedule_decision",
    "same_claim",
    "summarize_cycle",
    "validate_cron_expression",
    "zone_rules_version",
]
