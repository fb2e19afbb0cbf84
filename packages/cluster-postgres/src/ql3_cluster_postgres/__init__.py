"""QL3 on PostgreSQL: migrations, roles, the fenced repository and throwaway clusters."""

from __future__ import annotations

from importlib.metadata import version as _version

from ._faults import WireFaultProxy
from ._verify import (
    STALE_CLAIM_GRACE_MS_DEFAULT,
    ScheduleVerdict,
    VerifyReport,
    Violation,
    verify_history,
)

__version__ = _version("ql3-cluster-postgres")

__all__ = [
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "ScheduleVerdict",
    "VerifyReport",
    "Violation",
    "WireFaultProxy",
    "__version__",
    "verify_history",
]
