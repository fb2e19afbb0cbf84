"""Shared pytest configuration for ql3-cluster-postgres: loads the database fixtures of fix_db."""

from __future__ import annotations

pytest_plugins = ["fix_db"]
