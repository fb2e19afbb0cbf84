"""Does a server accept durable writes? The probe the Patroni waits and the chaos suite share.

A write counts when its commit returns without a warning: with `synchronous_commit` it waits for
the synchronous standby, and a wait cancelled from the client comes back as a WARNING, not an
error, which a plain `execute` would take for success.
"""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import dict_row

_WRITE_TIMEOUT_S = 2.0


def durable_write(dsn: str, *, timeout_s: float = _WRITE_TIMEOUT_S) -> bool:
    """Commit a transaction that writes WAL on `dsn`; True when it was acknowledged cleanly.

    The commit waits for the synchronous standby when there is one; a wait longer than
    `timeout_s` is cancelled from the client, which PostgreSQL answers with a WARNING, not an
    error: that (or any error) returns False. So True means "this server accepts writes and they
    are durable where Patroni requires".
    """
    return durable_write_acknowledged_ms(dsn, timeout_s=timeout_s) is not None


def durable_write_acknowledged_ms(dsn: str, *, timeout_s: float = _WRITE_TIMEOUT_S) -> int | None:
    """`durable_write`, returning when its commit was acknowledged by the server's clock.

    The time (epoch ms, `clock_timestamp()`) is read in the same session right after the commit
    returned, so it is no earlier than the acknowledgement; None when `durable_write` is False.
    """
    warnings: list[str] = []
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            conn.add_notice_handler(
                lambda diag: (
                    warnings.append(diag.message_primary or "")
                    if diag.severity_nonlocalized == "WARNING"
                    else None
                )
            )
            timer = threading.Timer(timeout_s, conn.cancel_safe)
            timer.start()
            try:
                conn.execute("SELECT pg_logical_emit_message(true, 'ql3_testkit', 'durable write')")
            finally:
                timer.cancel()
            cursor = conn.cursor(row_factory=dict_row)
            row = cursor.execute(
                "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms"
            ).fetchone()
    except psycopg.Error:
        return None
    return None if warnings or row is None else int(row["now_ms"])
