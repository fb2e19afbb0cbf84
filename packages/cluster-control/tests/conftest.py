"""Fixtures of the cluster-control tests.

The databases are the test kit's (`ql3_testkit.fixtures`: `pg_cluster`, `ql3_db`, ...), loaded as
cluster-postgres's tests load them; what only these tests need is beside it: `ql3 run` replicas
(fix_replicas.py), `ql3 worker` processes (fix_workers.py) and the command line run in-process
(fix_cli.py). fix_db.py holds shared helpers.
"""

from __future__ import annotations

pytest_plugins = ["ql3_testkit.fixtures", "fix_cli", "fix_replicas", "fix_workers"]
