"""The package's one connection factory: every connection QL3 opens is made here.

Each carries TCP keepalives and `tcp_user_timeout`, so a partitioned server is noticed in seconds
rather than after the kernel's two-hour default, and a `connect_timeout`, so a dead address fails
fast (`ConnectionSettings`, the one source of those defaults; cluster-control's settings feed it).
`ConnectionOptions` turns a caller's conninfo and the settings into the arguments libpq gets, and
is the only thing that opens connections: `open_connection` (psycopg errors as they are),
`connect` / `reuse_or_connect` (errors wrapped), `ConnectionOptions.pool` (the ingress pool,
whose connections get exactly the same arguments). psycopg's errors never leave this package:
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
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, ConfigDict, Field
from ql3_runtime_core import QL3Error, RepositoryUnavailableError

from ._errors import DatabaseError, InvalidConninfoError, NoWritableServerError
from ._retry import is_transient

__all__ = [
    "DRIVER_LOGGER",
    "ConnectionOptions",
    "ConnectionSettings",
    "StatementObserver",
    "check_conninfo",
    "close_quietly",
    "connect",
    "is_connection_lost",
    "no_writable_server",
    "open_connection",
    "reuse_or_connect",
    "wrap_error",
]

# The logger the driver writes to: callers configuring logs quiet it without naming the driver.
DRIVER_LOGGER = "psycopg"

# Called with (statement name, SQL text, parameters) right before a statement is sent; tests use
# it to check what the repository really sends (DESIGN §14).
StatementObserver: TypeAlias = Callable[[str, str, Mapping[str, Any]], None]


class ConnectionSettings(BaseModel):
    """How every QL3 connection is opened: its name, connect timeout, keepalives, user timeout.

    The defaults are seconds-scale so a partitioned replica notices the loss (and the server
    drops its locks) in seconds rather than the kernel's 15 minutes to 2 hours. Keys given in a
    caller's conninfo win over these.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    application_name: str = Field(default="ql3", min_length=1, max_length=63)
    connect_timeout_s: float = Field(default=5.0, gt=0, le=300)
    keepalives_idle_s: int = Field(default=5, ge=1, le=7_200)
    keepalives_interval_s: int = Field(default=2, ge=1, le=600)
    keepalives_count: int = Field(default=3, ge=1, le=100)
    tcp_user_timeout_ms: int = Field(default=10_000, ge=0, le=3_600_000)

    def libpq_defaults(self) -> dict[str, str]:
        """Return these settings as libpq conninfo keys."""
        return {
            "application_name": self.application_name,
            # libpq takes whole seconds and treats 1 as 2; round up so a short timeout stays short.
            "connect_timeout": str(max(2, math.ceil(self.connect_timeout_s))),
            "keepalives": "1",
            "keepalives_idle": str(self.keepalives_idle_s),
            "keepalives_interval": str(self.keepalives_interval_s),
            "keepalives_count": str(self.keepalives_count),
            "tcp_user_timeout": str(self.tcp_user_timeout_ms),
        }


class ConnectionOptions:
    """The connection factory of one component: the caller's conninfo plus `ConnectionSettings`.

    `application_name` overrides the settings' name (each component names its sessions);
    `server_settings` are session GUCs sent in the startup packet (no extra round trip).
    """

    __slots__ = ("conninfo", "settings")

    def __init__(
        self,
        conninfo: str,
        settings: ConnectionSettings | None = None,
        *,
        application_name: str | None = None,
        server_settings: Mapping[str, str] | None = None,
    ) -> None:
        settings = settings or ConnectionSettings()
        if application_name is not None:
            settings = settings.model_copy(update={"application_name": application_name})
        self.settings = settings
        defaults: dict[str, Any] = settings.libpq_defaults()
        try:
            given = conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            msg = f"conninfo: cannot parse the connection string: {exc}"
            raise ValueError(msg) from exc
        # The caller's keys win: an operator's conninfo is the last word (say, keepalives=0 on a
        # network that drops probes, or a longer connect_timeout across a slow link).
        defaults.update({key: value for key, value in given.items() if value is not None})
        if server_settings:
            # Appended to the caller's own `options`, so both apply.
            extra = " ".join(f"-c {name}={value}" for name, value in server_settings.items())
            defaults["options"] = f"{defaults.get('options', '')} {extra}".strip()
        self.conninfo = make_conninfo("", **defaults)

    def pool(
        self,
        *,
        max_size: int,
        timeout_s: float,
        check: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> ConnectionPool[psycopg.Connection[Any]]:
        """Return a closed pool (open it with `open()`) whose connections are made like ours.

        `check` runs on a connection before the pool hands it out; when it raises, the pool
        drops that connection and hands out another.
        """
        return ConnectionPool(
            self.conninfo,
            min_size=1,  # the first request does not pay for the connect
            max_size=max_size,
            # Every ingress statement is its own transaction: autocommit, like single connections.
            kwargs=_connect_kwargs(autocommit=True),
            open=False,
            timeout=timeout_s,
            name=self.settings.application_name,
            check=check,
        )


def _connect_kwargs(*, autocommit: bool) -> dict[str, Any]:
    """Return what `psycopg.connect` gets beside the conninfo (single connections and the pool)."""
    return {"autocommit": autocommit}


def open_connection(
    options: ConnectionOptions, *, autocommit: bool = True
) -> psycopg.Connection[tuple[Any, ...]]:
    """Open a connection made by `options`; psycopg errors propagate (set-up code wraps them).

    The only `psycopg.connect` call of the package.
    """
    return psycopg.connect(options.conninfo, **_connect_kwargs(autocommit=autocommit))


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
        return open_connection(options)
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
    """Tell whether `exc` leaves a COMMIT's fate unknown (DESIGN §6: uncertain, not failed).

    No SQLSTATE means the reply never arrived; class 08 (connection exception) and 57 (operator
    intervention, e.g. a backend terminated around its commit) may follow a durable commit.
    Anything else is the server saying the transaction did not commit.
    """
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    return exc.sqlstate is None or exc.sqlstate[:2] in {"08", "57"}


# A server answered but would not take writes: libpq's target_session_attrs refusals, a server
# starting up, shutting down or in recovery (57P03), a write in a read-only transaction (25006).
# psycopg lists every host's failure in one message, so one answering host is enough to match.
_NOT_WRITABLE_SQLSTATES = frozenset({"57P03", "25006"})
_NOT_WRITABLE_MARKERS = (
    "read-only",
    "hot standby mode",
    "is starting up",
    "is shutting down",
    "not yet accepting connections",
    "is in recovery mode",
)


def no_writable_server(exc: psycopg.Error) -> bool:
    """Tell whether `exc` says a server answered but none accepts writes (a leader change).

    Such a failure lasts as long as the HA manager takes to promote a new leader (seconds), so
    the service retries it soon, unlike a cluster where no host answers at all.
    """
    if exc.sqlstate in _NOT_WRITABLE_SQLSTATES:
        return True
    text = str(exc)
    return any(marker in text for marker in _NOT_WRITABLE_MARKERS)


def wrap_error(exc: psycopg.Error, action: str) -> QL3Error:
    """Return the QL3 error for a psycopg error raised while doing `action` (chain it with from)."""
    code = exc.sqlstate or "no sqlstate"
    text = f"{action}: {type(exc).__name__} ({code}): {str(exc).strip()}"
    if no_writable_server(exc):
        return NoWritableServerError(text)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or is_transient(
        exc.sqlstate
    ):
        return RepositoryUnavailableError(text)
    return DatabaseError(text)


def close_quietly(conn: psycopg.Connection[Any] | None) -> None:
    """Close `conn` ignoring errors: it is being thrown away because it failed."""
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            conn.close()
