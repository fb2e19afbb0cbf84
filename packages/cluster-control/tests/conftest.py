"""Fixtures of the cluster-control tests: see fix_db.py (real PostgreSQL) and fake_repository.py."""

from __future__ import annotations

pytest_plugins = ["fix_db"]
