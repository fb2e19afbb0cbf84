"""The numeric bounds of QL3's inputs, one constant each, shared by models, engine and CLI.

Every number a caller may give (a grace, a window, a preview length) is checked against these
before it reaches the cron engine or the database, so a bad value is a typed error naming the
field and its bound instead of an overflow deep inside datetime or a driver error from the
database. Where the database has the same rule as a CHECK, the constant is that CHECK's value.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CRON_MAX_LENGTH",
    "EPOCH_MS_MAX",
    "EPOCH_MS_MIN",
    "MISFIRE_GRACE_MS_MAX",
    "PREVIEW_COUNT_MAX",
]

# Epoch milliseconds a caller may give (window ends, preview start, verify scope): from 1970-01-01
# to the end of 9999-12-29 UTC. The cron engine walks wall times with Python's datetime, which ends
# with the year 9999; one day before that leaves room for every UTC offset (at most 14 h), so no
# time in this range can overflow it. Database times (bigint) are far inside either end.
EPOCH_MS_MIN: Final = 0
EPOCH_MS_MAX: Final = 253_402_127_999_999

# The database CHECK trigger_schedules_grace_bound (migration 0003): 7 days. A longer grace would
# call an occurrence admitted a week late "on time".
MISFIRE_GRACE_MS_MAX: Final = 604_800_000

# The database CHECK trigger_schedules_cron_shape (migration 0003), on the normalized expression.
CRON_MAX_LENGTH: Final = 1_000

# The most occurrences one preview computes: enough to read a schedule's year, bounded work.
PREVIEW_COUNT_MAX: Final = 10_000
