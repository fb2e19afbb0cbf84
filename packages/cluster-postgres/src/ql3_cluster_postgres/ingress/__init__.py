"""The ingress room: `WorkerIngress` (role `ql3_worker_ingress`), what workers call (DESIGN §10).

Owns taking, renewing, finishing, abandoning and releasing attempts, settling uncertain takes,
appending events, and the sessions (pool, client-side deadlines) they run in.

May import: the package's base modules and the `schema` room (the schema version check). Never
`admin`, `repository`, `verify` or `server`: workers and Coordinators share rows, not code.
"""
