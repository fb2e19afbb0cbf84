"""The Coordinator: one cycle of claims, decisions and commits, and the service loop around it.

Owns: the cycle (`Coordinator`), the service of `ql3 run` (`CoordinatorService`: cycles, idle
sleeps, faults, graceful stop) and the replication-safety guard. It may import the base modules
(settings, metrics, backoff, stop signals) and the public APIs of ql3-runtime-core and
ql3-cluster-postgres; never the worker, the demo or the CLI.

What other rooms and the package's `__init__` use is re-exported here: the modules stay private
to the room (the import audit refuses an import of a room's `_module` from outside it).
"""

from __future__ import annotations

from ._coordinator import Coordinator
from ._cycle import AdmissionCallback, CycleOverlapError, CycleResult
from ._service import CoordinatorService, postgres_repository_factory

__all__ = [
    "AdmissionCallback",
    "Coordinator",
    "CoordinatorService",
    "CycleOverlapError",
    "CycleResult",
    "postgres_repository_factory",
]
