"""Load the benchmark's SQL files (`bench/sql/*.sql`).

Nothing else lives here, so a baseline worker process starts without importing the harness.
"""

from __future__ import annotations

from importlib import resources
from typing import LiteralString

__all__ = ["load_sql"]


def load_sql(name: str) -> LiteralString:
    """Read `bench/sql/<name>.sql` as a statement (files are reviewed SQL, never built strings)."""
    # LiteralString by construction: the text is a reviewed file of this package, never built.
    return resources.files("bench").joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")
