"""Shared pytest configuration for ql3-cluster-postgres: the test kit's database fixtures."""

from __future__ import annotations

# pg_cluster, ql3_db, faketime_cluster, faketime_db, make_ql3_db (see ql3_testkit.fixtures).
pytest_plugins = ["ql3_testkit.fixtures", "sync_rep", "written_history"]
