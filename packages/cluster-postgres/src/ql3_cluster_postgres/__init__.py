"""QL3 on PostgreSQL: migrations, roles, the fenced repository and the demo's private server."""

from __future__ import annotations

from importlib.metadata import version as _version

from ._admin import ScheduleAdmin
from ._binaries import find_postgres_bin_dir
from ._errors import (
    AttemptStateError,
    DatabaseError,
    DuplicateScheduleError,
    MigrationTamperedError,
    PrivateServerError,
    ScheduleNotFoundError,
    ScheduleStateError,
    SchemaMismatchError,
    UnknownRoleError,
)
from ._ingress import QueuedAttempt, WorkerIngress
from ._migrations import SCHEMA_VERSION, check_schema_version, migrate
from ._private_server import PrivateServer
from ._records import ApplyReport, ScheduleRecord, ScheduleSpec, ScheduleStatus, StatusReport
from ._repository import ClusterState, PostgresScheduleRepository
from ._roles import GROUP_ROLES, ROLE_NAMES, create_login_user, group_role_name, provision_roles
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
    "GROUP_ROLES",
    "ROLE_NAMES",
    "SCHEMA_VERSION",
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "ApplyReport",
    "AttemptStateError",
    "ClusterState",
    "DatabaseError",
    "DuplicateScheduleError",
    "MigrationTamperedError",
    "PostgresScheduleRepository",
    "PrivateServer",
    "PrivateServerError",
    "QueuedAttempt",
    "ScheduleAdmin",
    "ScheduleNotFoundError",
    "ScheduleRecord",
    "ScheduleSpec",
    "ScheduleStateError",
    "ScheduleStatus",
    "ScheduleVerdict",
    "SchemaMismatchError",
    "StatusReport",
    "UnknownRoleError",
    "VerifyReport",
    "Violation",
    "WorkerIngress",
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "__version__",
    "adopt_zone_rules",
    "check_schema_version",
    "create_login_user",
    "find_postgres_bin_dir",
    "group_role_name",
    "migrate",
    "provision_roles",
    "read_zone_rules",
    "record_zone_rules",
    "verify_history",
]
