"""SCHEMA_VERSION and the shipped migration files agree (no database needed)."""

from __future__ import annotations

import re
from importlib.resources import files

from ql3_cluster_postgres import SCHEMA_VERSION


def test_schema_version_is_the_highest_migration_number() -> None:
    """SCHEMA_VERSION equals the highest NNNN prefix among the migrations in the installed wheel."""
    names = [
        entry.name
        for entry in (files("ql3_cluster_postgres") / "migrations").iterdir()
        if entry.name.endswith(".sql")
    ]
    numbers = sorted(int(name[:4]) for name in names)
    assert numbers[-1] == SCHEMA_VERSION
    assert numbers == list(range(1, len(numbers) + 1)), "migration numbers must be a serial"
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", name) for name in names)
