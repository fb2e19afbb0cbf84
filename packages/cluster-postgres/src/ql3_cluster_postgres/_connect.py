"""Connections for the repository, admin and ingress: conninfo defaults and error wrapping.

Every connection QL3 opens carries TCP keepalives and `tcp_user_timeout`, so a partitioned
server is noticed in seconds rather than after the kernel's two-hour default, and a
`connect_timeout`, so a dead address fails fast. psycopg's errors never leave this package:
`wrap_error` turns them into `RepositoryUnavailableError` (transient: connection, shutdown,
serialization) or `DatabaseError` (everything else), chained with `from`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from ql3_runtime_core import QL3Error, RepositoryUnavailableError

from ._errors import DatabaseError, InvalidConninfoError

__all__ = [
    "DRIVER_LOGGER",
    "ConnectionOptions",
    "StatementObserver",
    "check_conninfo",
    "close_quietly",
    "connect",
    "is_connection_lost",
    "reuse_or_connect",
    "wrap_error",
]

# The logger the driver writes to: callers configuring logs quiet it without naming the driver.
DRIVER_LOGGER = "psycopg"

# Called with (statement name, SQL text, parameters) right before a statement is sent; tests use
# it to check what the repository really sends (SPEC §10.2).
StatementObserver: TypeAlias = Callable[[str, str, Mapping[str, Any]], None]


class ConnectionOptions:
    """Connection settings shared by every QL3 connection; the caller's DSN wins on conflicts."""

    __slots__ = ("conninfo",)

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3",
        connect_timeout_s: float = 5.0,
        keepalives_idle_s: int = 5,
        keepalives_interval_s: int = 2,
        keepalives_count: int = 3,
        tcp_user_timeout_ms: int = 10_000,
        server_settings: Mapping[str, str] | None = None,
    ) -> None:
        defaults: dict[str, Any] = {
            "application_name": application_name,
            # libpq takes whole seconds and treats 1 as 2; round up so a short timeout stays short.
            "connect_timeout": str(max(2, math.ceil(connect_timeout_s))),
            "keepalives": "1",
            "keepalives_idle": str(keepalives_idle_s),
            "keepalives_interval": str(keepalives_interval_s),
            "keepalives_count": str(keepalives_count),
            "tcp_user_timeout": str(tcp_user_timeout_ms),
        }
        try:
            given = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            msg = f"conninfo: cannot parse the connection string: {exc}"
            raise ValueError(msg) from exc
        defaults.update({key: value for key, value in given.items() if value is not None})
        if server_settings:
            # Session GUCs travel in the startup packet: no extra round trip per connection.
            extra = " ".join(f"-c {name}={value}" for name, value in server_settings.items())
            defaults["options"] = f"{defaults.get('options', '')} {extra}".strip()
        self.conninfo = make_conninfo("", **defaults)


def check_conninfo(conninfo: str, *, field: str = "conninfo") -> None:
    """Check that `conninfo` parses as libpq `key=value` pairs or a URI; connect to nothing.

    For validating configuration before any connection is tried (the Coordinator's settings).

    Raises:
        InvalidConninfoError: naming `field`, never quoting the value (it may hold a password).

    """
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        # The driver's message may quote the string, and with it a password: keep only its kind.
        raise InvalidConninfoError(field) from exc


def connect(options: ConnectionOptions, action: str) -> psycopg.Connection[Any]:
    """Open an autocommit connection, or raise `RepositoryUnavailableError` naming `action`."""
    try:
        return psycopg.connect(options.conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise wrap_error(exc, action) from exc


def reuse_or_connect(
    conn: psycopg.Connection[Any] | None, options: ConnectionOptions, action: str
) -> psycopg.Connection[Any]:
    """Return `conn` while it is usable, else close it and `connect` a new one for `action`."""
    if conn is None or conn.closed or conn.broken:
        close_quietly(conn)
        return connect(options, action)
    return conn


def is_connection_lost(exc: psycopg.Error) -> bool:
    """Tell whether `exc` leaves a COMMIT's fate unknown (SPEC §7: uncertain, not failed).

    No SQLSTATE means the reply never arrived; class 08 (connection exception) and 57 (operator
    intervention, e.g. a backend terminated around its commit) may follow a durable commit.
    Anything else is the server saying the transaction did not commit.
    """
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    return exc.sqlstate is None or exc.sqlstate[:2] in {"08", "57"}


def wrap_error(exc: psycopg.Error, action: str) -> QL3Error:
    """Return the QL3 error for a psycopg error raised while doing `action` (chain it with from)."""
    code = exc.sqlstate or "no sqlstate"
    text = f"{action}: {type(exc).__name__} ({code}): {str(exc).strip()}"
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or _transient(code):
        return RepositoryUnavailableError(text)
    return DatabaseError(text)


# SQLSTATE classes worth retrying after a reconnect: connection exception, transaction rollback,
# insufficient resources, operator intervention, system error; and a session the server ended
# for idling inside a transaction.
_TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57", "58"})


def _transient(code: str) -> bool:
    return code[:2] in _TRANSIENT_CLASSES or code == "25P03"


def close_quietly(conn: psycopg.Connection[Any] | None) -> None:
    """Close `conn` ignoring errors: it is being thrown away because it failed."""
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            conn.close()
