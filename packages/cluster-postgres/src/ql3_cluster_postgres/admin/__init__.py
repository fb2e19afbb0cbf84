"""The admin room: `ScheduleAdmin` (role `ql3_admin`), what it takes and returns, and its plans.

Owns the transactions that create, reconcile, pause, resume and retire schedules (DESIGN §7,
§11), the pydantic models of their arguments and reports, and the pure planning that decides
what a change writes.

May import: the package's base modules (`_sql`, `_connect`, `_durability`, `_retry`, ...) and the
`zones` room (the recorded zone rules every placement computes with). Never `repository`,
`ingress`, `verify` or `server`: an admin change reaches the other roles only through the rows
it writes and the `ql3_schedule_changed` notification.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._admin import ScheduleAdmin
from ._backfill import (
    BACKFILL_BATCH_DEFAULT,
    BACKFILL_BATCH_MAX,
    MAX_BACKFILL_OCCURRENCES,
    BackfillBatch,
    BackfillPlan,
    BackfillReport,
)
from ._models import (
    SCHEDULE_NAME_MAX_LENGTH,
    ApplyReport,
    PauseRequest,
    ScheduleRecord,
    ScheduleSpec,
    ScheduleStatus,
    StatusReport,
)
from ._pauses import PauseSpan
from ._prune import (
    PRUNE_BATCH_DEFAULT,
    PRUNE_BATCH_MAX,
    PruneBatch,
    PruneReport,
    parse_duration_ms,
    prune_history,
)
from ._trigger import ManualRun, check_request_id, checked_payload

__all__ = [
    "BACKFILL_BATCH_DEFAULT",
    "BACKFILL_BATCH_MAX",
    "MAX_BACKFILL_OCCURRENCES",
    "PRUNE_BATCH_DEFAULT",
    "PRUNE_BATCH_MAX",
    "SCHEDULE_NAME_MAX_LENGTH",
    "ApplyReport",
    "BackfillBatch",
    "BackfillPlan",
    "BackfillReport",
    "ManualRun",
    "PauseRequest",
    "PauseSpan",
    "PruneBatch",
    "PruneReport",
    "ScheduleAdmin",
    "ScheduleRecord",
    "ScheduleSpec",
    "ScheduleStatus",
    "StatusReport",
    "check_request_id",
    "checked_payload",
    "parse_duration_ms",
    "prune_history",
]
