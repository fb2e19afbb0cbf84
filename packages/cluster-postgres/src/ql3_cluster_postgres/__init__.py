"""QL3 on PostgreSQL: migrations, roles, the fenced repository, history reads, test clusters."""

from __future__ import annotations

from importlib.metadata import version as _version

from ._admin import ScheduleAdmin
from ._binaries import find_faketime_library, find_postgres_bin_dir
from ._connect import DRIVER_LOGGER, check_conninfo
from ._errors import (
    AttemptStateError,
    DatabaseError,
    DuplicateScheduleError,
    InvalidConninfoError,
    MigrationTamperedError,
    ScheduleNotFoundError,
    ScheduleStateError,
    SchemaMismatchError,
    ThrowawayClusterError,
    UnknownRoleError,
)
from ._faults import WireFaultProxy
from ._history import HistoryReader, RunRecord
from ._ingress import QueuedAttempt, WorkerIngress
from ._migrations import SCHEMA_VERSION, check_schema_version, migrate
from ._provision import (
    Ql3Database,
    drop_database,
    login_password,
    login_user_name,
    prepare_ql3_database,
)
from ._records import (
    SCHEDULE_NAME_MAX_LENGTH,
    ApplyReport,
    ScheduleRecord,
    ScheduleSpec,
    ScheduleStatus,
    StatusReport,
)
from ._repository import PostgresScheduleRepository
from ._roles import (
    GROUP_ROLES,
    ROLE_NAMES,
    create_login_user,
    group_role_name,
    provision_roles,
    provision_roles_if_missing,
)
from ._throwaway import ThrowawayCluster
from ._verify import (
    STALE_CLAIM_GRACE_MS_DEFAULT,
    ScheduleVerdict,
    VerifyReport,
    Violation,
    verify_history,
)
from ._zone_rules import (
    ZoneRulesChange,
    ZoneRulesRecord,
    adopt_zone_rules,
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
    "ApplyReport",
    "AttemptStateError",
    "DatabaseError",
    "DuplicateScheduleError",
    "HistoryReader",
    "InvalidConninfoError",
    "MigrationTamperedError",
    "PostgresScheduleRepository",
    "Ql3Database",
    "QueuedAttempt",
    "RunRecord",
    "ScheduleAdmin",
    "ScheduleNotFoundError",
    "ScheduleRecord",
    "ScheduleSpec",
    "ScheduleStateError",
    "ScheduleStatus",
    "ScheduleVerdict",
    "SchemaMismatchError",
    "StatusReport",
    "ThrowawayCluster",
    "ThrowawayClusterError",
    "UnknownRoleError",
    "VerifyReport",
    "Violation",
    "WireFaultProxy",
    "WorkerIngress",
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "__version__",
    "adopt_zone_rules",
    "check_conninfo",
    "check_schema_version",
    "create_login_user",
    "drop_database",
    "find_faketime_library",
    "find_postgres_bin_dir",
    "group_role_name",
    "login_password",
    "login_user_name",
    "migrate",
    "prepare_ql3_database",
    "provision_roles",
    "provision_roles_if_missing",
    "read_zone_rules",
    "record_zone_rules",
    "verify_history",
]
