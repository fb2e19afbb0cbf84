"""The verify room: `verify_history` (`ql3 verify`), which judges a history against DESIGN §7.

Owns the snapshot reads and every rule (shape, order, cursor, revisions, accounting, skip
records, attempts, stall, lateness) and the report. Read-only: nothing here writes.

May import: the package's base modules and the `zones` room (the zone rules each revision was
computed with). Never `admin`, `repository`, `ingress` or `server`: verify judges what they
wrote by reading it, so sharing their code would let a bug agree with itself.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._report import ScheduleLateness
from ._verify import (
    STALE_CLAIM_GRACE_MS_DEFAULT,
    VERIFY_RULES,
    VIOLATIONS_PER_RULE_DEFAULT,
    VIOLATIONS_PER_RULE_MAX,
    ScheduleVerdict,
    VerifyReport,
    Violation,
    verify_history,
)

__all__ = [
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "VERIFY_RULES",
    "VIOLATIONS_PER_RULE_DEFAULT",
    "VIOLATIONS_PER_RULE_MAX",
    "ScheduleLateness",
    "ScheduleVerdict",
    "VerifyReport",
    "Violation",
    "verify_history",
]
