"""QL3 on PostgreSQL: migrations, roles, the fenced repository, history reads, the demo's server."""

from __future__ import annotations

from importlib.metadata import version as _version

from ._connect import DRIVER_LOGGER, ConnectionSettings, check_conninfo
from ._errors import (
    DatabaseError,
    DuplicateScheduleError,
    InvalidConninfoError,
    MigrationTamperedError,
    NoWritableServerError,
    PrivateServerError,
    ScheduleNotFoundError,
    ScheduleStateError,
    SchemaMismatchError,
    UnknownRoleError,
    ZoneRulesUnavailableError,
)
from ._history import AttemptCounts, AttemptRecord, HistoryReader, RunRecord, RunSummary
from .admin import (
    SCHEDULE_NAME_MAX_LENGTH,
    ApplyReport,
    ManualRun,
    PauseSpan,
    ScheduleAdmin,
    ScheduleRecord,
    ScheduleSpec,
    ScheduleStatus,
    StatusReport,
)
from .ingress import TaskConnection, WorkerIngress
from .repository import PostgresScheduleRepository
from .schema import (
    GROUP_ROLES,
    ROLE_NAMES,
    SCHEMA_VERSION,
    check_schema_version,
    create_login_user,
    group_role_name,
    migrate,
    provision_roles,
    provision_roles_if_missing,
)
from .server import PrivateServer, find_postgres_bin_dir
from .verify import (
    STALE_CLAIM_GRACE_MS_DEFAULT,
    VERIFY_RULES,
    VIOLATIONS_PER_RULE_DEFAULT,
    VIOLATIONS_PER_RULE_MAX,
    ScheduleLateness,
    ScheduleVerdict,
    VerifyReport,
    Violation,
    verify_history,
)
from .zones import (
    ZoneMove,
    ZoneRulesChange,
    ZoneRulesRecord,
    ZoneRuleVersion,
    adopt_zone_rules,
    load_recorded_zone_rules,
    read_zone_rule_history,
    read_zone_rules,
    record_zone_rules,
)

__version__ = _version("ql3-cluster-postgres")

__all__ = [
    "DRIVER_LOGGER",
    "GROUP_ROLES",
    "ROLE_NAMES",
    "SCHEDULE_NAME_MAX_LENGTH",
    "SCHEMA_VERSION",
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "VERIFY_RULES",
    "VIOLATIONS_PER_RULE_DEFAULT",
    "VIOLATIONS_PER_RULE_MAX",
    "ApplyReport",
    "AttemptCounts",
    "AttemptRecord",
    "ConnectionSettings",
    "DatabaseError",
    "DuplicateScheduleError",
    "HistoryReader",
    "InvalidConninfoError",
    "ManualRun",
    "MigrationTamperedError",
    "NoWritableServerError",
    "PauseSpan",
    "PostgresScheduleRepository",
    "PrivateServer",
    "PrivateServerError",
    "RunRecord",
    "RunSummary",
    "ScheduleAdmin",
    "ScheduleLateness",
    "ScheduleNotFoundError",
    "ScheduleRecord",
    "ScheduleSpec",
    "ScheduleStateError",
    "ScheduleStatus",
    "ScheduleVerdict",
    "SchemaMismatchError",
    "StatusReport",
    "TaskConnection",
    "UnknownRoleError",
    "VerifyReport",
    "Violation",
    "WorkerIngress",
    "ZoneMove",
    "ZoneRuleVersion",
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "ZoneRulesUnavailableError",
    "__version__",
    "adopt_zone_rules",
    "check_conninfo",
    "check_schema_version",
    "create_login_user",
    "find_postgres_bin_dir",
    "group_role_name",
    "load_recorded_zone_rules",
    "migrate",
    "provision_roles",
    "provision_roles_if_missing",
    "read_zone_rule_history",
    "read_zone_rules",
    "record_zone_rules",
    "verify_history",
]
