"""The console room: what the web console (`ql3 web`) reads, and the verify verdicts it shows.

`ConsoleReader` reads each page in one read-only snapshot as `ql3_observer`;
`record_verify_report` stores a `ql3 verify` verdict (as `ql3_admin`) for the verify page.

May import: the package's base modules, `verify` (the report it records) and `schema` (the
schema version check). Nothing below imports it.
"""

from __future__ import annotations

from ._models import (
    AdmissionRow,
    AlertsPage,
    ClaimRow,
    LatenessPoint,
    ReplicasPage,
    RunAttemptRow,
    RunCountRow,
    RunningAttemptRow,
    SchedulePage,
    ScheduleRow,
    SchedulesPage,
    SkipRow,
    VerifyResult,
    WorkersPage,
)
from ._reader import CONSOLE_ROWS_DEFAULT, ConsoleReader
from ._record import record_verify_report

__all__ = [
    "CONSOLE_ROWS_DEFAULT",
    "AdmissionRow",
    "AlertsPage",
    "ClaimRow",
    "ConsoleReader",
    "LatenessPoint",
    "ReplicasPage",
    "RunAttemptRow",
    "RunCountRow",
    "RunningAttemptRow",
    "SchedulePage",
    "ScheduleRow",
    "SchedulesPage",
    "SkipRow",
    "VerifyResult",
    "WorkersPage",
    "record_verify_report",
]
