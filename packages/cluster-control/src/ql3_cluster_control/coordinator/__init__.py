"""The Coordinator: one cycle of claims, decisions and commits, and the service loop around it.

Owns: the cycle (`Coordinator`), the service of `ql3 run` (`CoordinatorService`: cycles, idle
sleeps, faults, graceful stop) and the replication-safety guard. It may import the base modules
(settings, metrics, backoff, stop signals) and the public APIs of ql3-runtime-core and
ql3-cluster-postgres; never the worker, the demo or the CLI.
"""
