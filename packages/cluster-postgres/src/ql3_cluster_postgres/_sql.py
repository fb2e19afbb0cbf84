"""The SQL statements of the repository, admin and ingress, loaded once from `sql/*.sql`.

One statement per file, named after the method that sends it (STYLE §4). The files ship inside
the wheel and are read with `importlib.resources`, so the SQL stays reviewable as SQL and a test
can read exactly what the repository sends.
"""

from __future__ import annotations

from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, LiteralString

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["QUERIES", "query"]


def _load() -> Mapping[str, LiteralString]:
    folder = resources.files(__package__ or "ql3_cluster_postgres").joinpath("sql")
    loaded: dict[str, LiteralString] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            # The files are constants shipped in the wheel: literal SQL, never built from data,
            # which is what LiteralString promises psycopg (mypy checks it as str).
            loaded[entry.name.removesuffix(".sql")] = entry.read_text("utf-8")
    return MappingProxyType(loaded)


QUERIES: Mapping[str, LiteralString] = _load()


def query(name: str) -> LiteralString:
    """Return the statement stored in `sql/<name>.sql`; a missing name is a packaging bug."""
    try:
        return QUERIES[name]
    except KeyError:
        msg = f"sql: no statement file {name!r}.sql in the package (known: {sorted(QUERIES)})"
        raise LookupError(msg) from None
