"""The ingress room: `WorkerIngress` (role `ql3_worker_ingress`), what workers call (DESIGN §10).

Owns taking, renewing, finishing, abandoning and releasing attempts, settling uncertain takes,
appending events, waking idle workers when attempts are queued (`AttemptWakeups`, migration
0015), recording and delivering alerts (`AlertIngress`, migration 0013), and the
sessions (pool, client-side deadlines) they run in.

May import: the package's base modules and the `schema` room (the schema version check). Never
`admin`, `repository`, `verify` or `server`: workers and Coordinators share rows, not code.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._alerts import AlertIngress
from ._ingress import TaskConnection, WorkerIngress
from ._wakeups import AttemptWakeups

__all__ = [
    "AlertIngress",
    "AttemptWakeups",
    "TaskConnection",
    "WorkerIngress",
]
