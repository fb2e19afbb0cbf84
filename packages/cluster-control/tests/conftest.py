"""Fixtures of the cluster-control tests: fix_db.py (PostgreSQL), fix_workers.py (`ql3 worker`)."""

from __future__ import annotations

pytest_plugins = ["fix_db", "fix_workers"]
