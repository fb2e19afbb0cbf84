"""`ql3 demo`: a private PostgreSQL, racing replicas (one SIGKILLed), a worker, a verdict.

Owns: running the demo (its processes, its live table) and its verdict, counted from the history
read back from the database. It starts `ql3 run` and `ql3 worker` as processes, so it imports
neither the Coordinator nor the worker: only the base modules (settings, schedules as code) and
the public APIs of ql3-runtime-core and ql3-cluster-postgres. Only the CLI imports it.
"""
