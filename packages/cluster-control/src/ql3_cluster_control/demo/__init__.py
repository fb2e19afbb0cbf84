"""`ql3 demo`: a private PostgreSQL, racing replicas (one SIGKILLed), a worker, a verdict.

Owns: running the demo (its processes, its live table) and its verdict, counted from the history
read back from the database. It starts `ql3 run` and `ql3 worker` as processes, so it imports
neither the Coordinator nor the worker: only the base modules (settings, schedules as code) and
the public APIs of ql3-runtime-core and ql3-cluster-postgres. Only the CLI imports it.

What other rooms and the package's `__init__` use is re-exported here: the modules stay private
to the room (the import audit refuses an import of a room's `_module` from outside it).
"""

from __future__ import annotations

from ._demo import DemoOptions, run_demo
from ._verdict import DemoVerdict

__all__ = [
    "DemoOptions",
    "DemoVerdict",
    "run_demo",
]
