"""The repository room: `PostgresScheduleRepository` (role `ql3_runtime`), what a replica sends.

Owns the claim, the fenced commit, release, quarantine, the settling of an uncertain commit
(DESIGN §3, §5, §6, §8), the small reads a Coordinator needs (clock, next-due hint, overdue
count, cluster state) and the commit outcomes built from their rows.

May import: the package's base modules, the `zones` room (the zone rules a replica claims with)
and the `schema` room (the schema version check). Never `admin`, `ingress`, `verify` or
`server`.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._repository import PostgresScheduleRepository

__all__ = [
    "PostgresScheduleRepository",
]
