"""The worker: takes admitted attempts, runs them, renews their leases, records how they ended.

Owns: the loop (`Worker`), the runners of one attempt (a shell command in its own process
group, a Python task's callable), the recording of ends, the release of what a stopping worker
held, the registered Python tasks, the worker's metrics and the PostgreSQL ingress it builds.
It may import the base modules (settings, metrics server, backoff, stop signals) and the public
APIs of ql3-runtime-core and ql3-cluster-postgres; never the Coordinator, the demo or the CLI.

What other rooms and the package's `__init__` use is re-exported here: the modules stay private
to the room (the import audit refuses an import of a room's `_module` from outside it).
"""

from __future__ import annotations

from ._ingress import postgres_ingress_factory
from ._metrics import WorkerMetrics
from ._python_runner import TaskContext, TaskFunction
from ._worker import Worker

__all__ = [
    "TaskContext",
    "TaskFunction",
    "Worker",
    "WorkerMetrics",
    "postgres_ingress_factory",
]
