"""Loads the kit's own SQL from `sql/*.sql` (standbys, timelines, test databases).

One loader for the whole kit. Templates that take identifiers use `{name}` placeholders filled by
`psycopg.sql.SQL.format` with `sql.Identifier`.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import LiteralString

__all__ = ["statement"]


@functools.cache
def statement(name: str) -> LiteralString:
    """Return the text of `sql/<name>.sql`, read once from the installed package."""
    # A packaged, reviewed file, not user input: a literal query (mypy treats it as str).
    return (files(__package__) / "sql" / f"{name}.sql").read_text(encoding="utf-8")
