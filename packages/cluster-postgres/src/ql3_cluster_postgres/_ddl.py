"""Loads the infrastructure SQL in `provisioning/*.sql` (roles, migration ledger, server ping).

Kept apart from the repository's `sql/` folder and its loader: these statements run as the
superuser or the owner during provisioning, never on the scheduling hot path. Templates that take
identifiers use `{name}` placeholders filled by `psycopg.sql.SQL.format` with `sql.Identifier`.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import LiteralString

__all__ = ["ddl"]


@functools.cache
def ddl(name: str) -> LiteralString:
    """Return the text of `provisioning/<name>.sql`, read once from the installed package."""
    return (files(__package__) / "provisioning" / f"{name}.sql").read_text(encoding="utf-8")
    # A packaged, reviewed file, not user input: a literal query (mypy treats it as str).
