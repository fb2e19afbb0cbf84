"""The reads of one verify: every statement in its one READ ONLY REPEATABLE READ transaction.

Small results come back whole as dicts; results of any size (runs, attempts, skip records)
stream through server-side cursors, a batch at a time, so ten million runs are never held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from psycopg.rows import dict_row

from ql3_cluster_postgres._send import send

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import psycopg
    from psycopg.rows import RowFactory

__all__ = ["SnapshotReader"]

# "Every occurrence" for the SQL's `>= since_ms`: below every bigint.
_ALL_MS: Final = -(2**63)
# Rows per round trip of a server-side cursor: large enough that the round trips do not count,
# small enough that a batch of runs stays a few hundred kilobytes.
_BATCH_ROWS: Final = 20_000


class SnapshotReader:
    """The statements of one check, all in its one READ ONLY REPEATABLE READ transaction."""

    def __init__(self, conn: psycopg.Connection[Any], since_ms: int | None) -> None:
        self.conn = conn
        self.since_ms = since_ms
        self._cursors = 0

    def execute(self, name: str) -> None:
        """Run a statement that returns nothing (a setting of this transaction)."""
        send(self.conn, name)

    def rows(self, name: str, **params: object) -> list[dict[str, Any]]:
        """Fetch a small result (schedules, revisions) whole, as dicts."""
        with self.conn.cursor(row_factory=dict_row) as cur:
            return send(cur, name, self._params(params)).fetchall()

    def stream(self, name: str, row_factory: RowFactory[Any], **params: object) -> Iterator[Any]:
        """Yield a result of any size row by row (see `batches`)."""
        for batch in self.batches(name, row_factory, **params):
            yield from batch

    def batches(
        self, name: str, row_factory: RowFactory[Any], **params: object
    ) -> Iterator[list[Any]]:
        """Yield a result of any size through a server-side cursor, `_BATCH_ROWS` rows at a time."""
        self._cursors += 1
        # A named cursor is a server-side one; names are unique within the transaction, and two
        # streams may be open at once (occurrences and skip records are walked side by side).
        with self.conn.cursor(f"ql3_verify_{self._cursors}", row_factory=row_factory) as cur:
            send(cur, name, self._params(params))
            while batch := cur.fetchmany(_BATCH_ROWS):
                yield batch

    def _params(self, params: Mapping[str, object]) -> dict[str, object]:
        return {"since_ms": _ALL_MS if self.since_ms is None else self.since_ms, **params}
