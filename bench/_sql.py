"""The benchmark's SQL files (`bench/sql/*.sql`) and its one way to connect.

Nothing else lives here, so a baseline worker process starts without importing the harness. Every
connection the harness and the baseline open is made by `connect` (autocommit, rows as dicts read
by column name); the QL3 replicas under test connect through ql3-cluster-postgres' own factory.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, LiteralString

import psycopg
from psycopg.rows import dict_row

__all__ = ["connect", "load_sql"]


def load_sql(name: str) -> LiteralString:
    """Read `bench/sql/<name>.sql` as a statement (files are reviewed SQL, never built strings)."""
    # LiteralString by construction: the text is a reviewed file of this package, never built.
    return resources.files("bench").joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")


def connect(
    dsn: str, *, application_name: str = "ql3-bench", options: str = ""
) -> psycopg.Connection[dict[str, Any]]:
    """Open an autocommit connection that returns rows as dicts (read by column name).

    `options` are server settings for the session (`-c name=value ...`), as libpq sends them.
    """
    extra: dict[str, Any] = {"options": options} if options else {}
    return psycopg.connect(
        dsn, autocommit=True, row_factory=dict_row, application_name=application_name, **extra
    )
