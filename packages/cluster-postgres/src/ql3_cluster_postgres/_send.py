"""The one way a statement reaches PostgreSQL: `send(connection or cursor, name, params)`.

Why one: every statement QL3 sends is a file of this package (`sql/`, `provisioning/`), and
sending it by its name is what keeps the rest true everywhere at once. The text is the loader's
(`_sql`): compacted and headed `-- ql3: <name>`, so psycopg caches its placeholder conversion and
`pg_stat_statements` names it; a statement observer sees exactly the name, text and parameters
sent; rows come back through the row factory the caller names (by column name, see `_rows`), or
the connection's own; identifiers a template takes (a role, a database) are quoted by psycopg
(`fill`), never pasted in. A second path would be a place where one of these quietly stops
holding (a statement sent uncompacted, unobserved, or read by position).

What surrounds a statement stays with the caller, because it belongs to the transaction and not
to one statement: the durability check of a COMMIT (`_durability.acknowledged_write`), the
client-side deadline that cuts a connection (`_deadlines`), the retry of a whole transaction
(`_retry`). Two things reach the server without a name, on purpose: migration files, which
are scripts (several statements, no parameters, checksummed as shipped) run by
`schema/_migrations` alone, and the ingress pool's liveness probe, an empty query that no
statement file could express.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, LiteralString, TypeVar, overload

import psycopg
from psycopg import sql

from ._sql import provisioning, query

if TYPE_CHECKING:
    from psycopg.abc import Params
    from psycopg.rows import RowFactory

    from ._connect import StatementObserver

__all__ = ["Folder", "send"]

Folder = Literal["sql", "provisioning"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound="psycopg.Cursor[Any] | psycopg.ServerCursor[Any]")


@overload
def send(
    target: _C,
    name: str,
    params: Params | None = None,
    *,
    folder: Folder = "sql",
    fill: Mapping[str, sql.Composable] | None = None,
    observer: StatementObserver | None = None,
) -> _C: ...


@overload
def send(
    target: psycopg.Connection[Any],
    name: str,
    params: Params | None = None,
    *,
    rows: RowFactory[_T],
    folder: Folder = "sql",
    fill: Mapping[str, sql.Composable] | None = None,
    observer: StatementObserver | None = None,
) -> psycopg.Cursor[_T]: ...


@overload
def send(
    target: psycopg.Connection[Any],
    name: str,
    params: Params | None = None,
    *,
    folder: Folder = "sql",
    fill: Mapping[str, sql.Composable] | None = None,
    observer: StatementObserver | None = None,
) -> psycopg.Cursor[Any]: ...


def send(
    target: psycopg.Connection[Any] | psycopg.Cursor[Any] | psycopg.ServerCursor[Any],
    name: str,
    params: Params | None = None,
    *,
    rows: RowFactory[Any] | None = None,
    folder: Folder = "sql",
    fill: Mapping[str, sql.Composable] | None = None,
    observer: StatementObserver | None = None,
) -> psycopg.Cursor[Any] | psycopg.ServerCursor[Any]:
    """Send statement `name` of `folder` with `params`; return the cursor holding its rows.

    `target` is a connection (a new client-side cursor is opened on it, with `rows` as its row
    factory when given) or a cursor the caller opened (a server-side one to stream a result,
    or one inside a `with` block). `fill` quotes identifiers into a template that takes them.
    """
    text = query(name) if folder == "sql" else provisioning(name)
    statement: LiteralString | sql.Composed = text if fill is None else sql.SQL(text).format(**fill)
    if observer is not None:
        observer(name, text, params if isinstance(params, Mapping) else {})
    if isinstance(target, psycopg.Connection):
        cursor = target.cursor() if rows is None else target.cursor(row_factory=rows)
        return cursor.execute(statement, params)
    return target.execute(statement, params)
