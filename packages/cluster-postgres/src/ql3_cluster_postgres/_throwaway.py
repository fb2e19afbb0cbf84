"""Disposable PostgreSQL clusters for tests, benchmarks, chaos runs and the demo (SPEC §9, §10).

A `ThrowawayCluster` owns a private temporary folder (data dir, unix socket dir, log, faketime
control file) and one postmaster listening on a free 127.0.0.1 port with SCRAM password
authentication. When the process is root, initdb and the server run as an unprivileged OS user
(`postgres` by default): PostgreSQL refuses to run as root.

The database clock can be moved while the server runs: with `faketime=True` the postmaster is
started under libfaketime reading its offset from a control file on every clock call
(`FAKETIME_NO_CACHE=1`), so `set_clock_offset_ms` is seen at once by open connections. The
monotonic clock stays real (`FAKETIME_DONT_FAKE_MONOTONIC=1`), otherwise PostgreSQL's timeouts and
latches misbehave; parallel query is off because workers would not share the offset reliably.
`LIBFAKETIME_PATH` may point at the preload library when it is not in a standard place.

Fencing: `fence()` stops the server immediately and renames `postgresql.conf` to
`postgresql.conf.fenced`; PostgreSQL then refuses to start from that data dir ("could not access the
server configuration file"), which is exactly what a fenced old primary must do.
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

from . import _replication
from ._binaries import find_faketime_library, find_postgres_bin_dir
from ._cluster_files import (
    faketime_env,
    initdb,
    write_clock_file,
    write_frozen_clock_file,
    write_settings,
)
from ._ddl import ddl
from ._errors import ThrowawayClusterError
from ._lifecycle import Started
from ._processes import (
    HOST,
    free_port,
    log_tail,
    run_as,
    spawn_server,
    stop_server,
    tool_env,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

__all__ = ["ThrowawayCluster"]

_SUPERUSER = "postgres"
_START_TIMEOUT_S = 60.0
_PORT_ATTEMPTS = 5
# Startup failures worth retrying: a port taken meanwhile, or a crashed predecessor's leftovers.
_RETRYABLE_START_ERRORS = ("Address already in use", "could not bind", "is still in use")

_LIVE: dict[ThrowawayCluster, int] = {}  # started clusters -> PID of the process that owns them


@atexit.register
def _stop_all_at_exit() -> None:
    """Safety net: never leave servers or folders behind, even when a program forgot to stop."""
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()  # a no-op in a forked child, which must spare its parent's clusters


class ThrowawayCluster(Started):
    """A private PostgreSQL server in a temporary folder; always stopped and removed after use.

    Use as a context manager or call `start()` / `stop()`. See the module docstring for faketime
    and fencing. `durable=False` turns fsync, full_page_writes and synchronous_commit off (fast
    tests; a crash may lose data, which tests that kill servers must keep in mind). `keep=True`
    leaves the folder for post-mortems. `os_user` runs the server when this process is root; a
    `base_dir` must then be traversable by that user (the default, the system temp dir, is).
    """

    __module__ = "ql3_cluster_postgres"

    def __init__(
        self,
        *,
        faketime: bool = False,
        settings: Mapping[str, str] | None = None,
        bin_dir: Path | None = None,
        base_dir: Path | None = None,
        durable: bool = False,
        name: str = "ql3",
        os_user: str = "postgres",
        keep: bool = False,
    ) -> None:
        self.faketime = faketime
        self.durable = durable
        self.name = name
        self.os_user = os_user
        self.keep = keep
        self.host = HOST
        self.superuser = _SUPERUSER
        self.superuser_password = secrets.token_hex(16)
        self._settings = dict(settings or {})
        self._bin_dir = bin_dir
        self._base_parent = base_dir
        self._base: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._clock_offset_ms = 0
        self._standbys: list[ThrowawayCluster] = []
        self._fenced = False

    # -- where and how to reach it -------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1 (fixed for the cluster's life, also across restarts)."""
        if self._port is None:
            raise ThrowawayClusterError(f"cluster {self.name!r}: not started")
        return self._port

    @property
    def base_dir(self) -> Path:
        """The cluster's private temporary folder (holds data dir, socket, log)."""
        if self._base is None:
            raise ThrowawayClusterError(f"cluster {self.name!r}: not started")
        return self._base

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
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int:
        """The postmaster's PID."""
        if self._proc is None:
            raise ThrowawayClusterError(f"cluster {self.name!r}: no server process")
        return self._proc.pid

    @property
    def fenced(self) -> bool:
        """True once `fence()` ran."""
        return self._fenced

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
        """Open an autocommit superuser connection (provisioning and test set-up only)."""
        return psycopg.connect(self.dsn(dbname), autocommit=True, connect_timeout=10)

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Create the folder, run initdb and start the server on a free port.

        Raises:
            ThrowawayClusterError: binaries or libfaketime missing, or the server did not start
                (the message ends with the server log's tail).

        """
        if self._base is not None:
            return self
        self._create_base_dir()
        try:
            self._initdb()
            self._write_settings()
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server immediately (and standbys made from it) and remove the folder.

        Idempotent; also safe after a failed start, `kill()` or `fence()`. A no-op in a forked
        child: only the process that started the cluster tears it down.
        """
        if _LIVE.get(self, os.getpid()) != os.getpid():
            return
        for standby in self._standbys:
            standby.stop()
        self._standbys.clear()
        self._halt()
        if self._base is not None and not self.keep:
            shutil.rmtree(self._base, ignore_errors=True)
        self._base = None
        _LIVE.pop(self, None)

    def kill(self) -> None:
        """Crash the server: SIGKILL the postmaster, then wait for its orphaned backends."""
        self._halt(crash=True)

    def restart(self) -> None:
        """Start the server again on the same port (after `kill()`, or to restart it)."""
        self._halt()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._launch(self.port):
            if time.monotonic() > deadline:
                raise self._start_error(f"port {self.port} stayed busy")
            time.sleep(0.2)

    def fence(self) -> None:
        """Stop the server immediately and make every later start from this data dir fail."""
        self._halt()
        conf = self.data_dir / "postgresql.conf"
        if conf.exists():
            conf.rename(conf.with_name("postgresql.conf.fenced"))
        self._fenced = True

    # -- clock ---------------------------------------------------------------------------------

    def set_clock_offset_ms(self, offset_ms: int) -> None:
        """Set the database clock to real time + `offset_ms`, live: open sessions see it at once."""
        if not self.faketime:
            raise ThrowawayClusterError(
                f"cluster {self.name!r}: set_clock_offset_ms needs ThrowawayCluster(faketime=True)"
            )
        self._clock_offset_ms = offset_ms
        self._write_clock_file()

    def freeze_clock_at_ms(self, at_ms: int) -> None:
        """Stop the database clock at `at_ms` (epoch ms), live; `set_clock_offset_ms` restarts it.

        Every `clock_timestamp()` then returns exactly `at_ms`, so a test can put a claim's
        commit or takeover precisely on its expiry instant.
        """
        if not self.faketime:
            raise ThrowawayClusterError(
                f"cluster {self.name!r}: freeze_clock_at_ms needs ThrowawayCluster(faketime=True)"
            )
        write_frozen_clock_file(self.base_dir, at_ms)

    @property
    def clock_offset_ms(self) -> int:
        """The offset last set with `set_clock_offset_ms` (0 at start)."""
        return self._clock_offset_ms

    def _write_clock_file(self) -> None:
        write_clock_file(self.base_dir, self._clock_offset_ms)

    # -- replication ---------------------------------------------------------------------------

    def create_standby(self, *, synchronous: bool = False) -> ThrowawayCluster:
        """Clone this server with `pg_basebackup -R`, start it and wait until it streams.

        The standby has its own folder, port and (with faketime) its own clock file starting at
        this cluster's offset. `synchronous=True` makes it the synchronous standby and turns
        synchronous_commit on here, so commits wait for it. `stop()` here also stops it.
        """
        standby = ThrowawayCluster(
            faketime=self.faketime,
            settings=self._settings,
            bin_dir=self.bin_dir,
            base_dir=self._base_parent,
            durable=self.durable,
            name=f"{self.name}_standby{len(self._standbys) + 1}",
            os_user=self.os_user,
            keep=self.keep,
        )
        standby.superuser_password = self.superuser_password
        standby._clock_offset_ms = self._clock_offset_ms
        self._standbys.append(standby)
        standby._create_base_dir()
        try:
            _replication.base_backup(self, standby, no_sync=not self.durable)
            standby._start_on_free_port()
        except BaseException:
            standby.stop()
            raise
        if synchronous:
            _replication.make_synchronous(self, standby.name)
        _replication.wait_streaming(self, standby.name, synchronous=synchronous)
        return standby

    def promote(self) -> None:
        """Promote this standby (pg_ctl promote) and wait until it accepts writes."""
        _replication.promote(self)

    def in_recovery(self) -> bool:
        """Tell whether the server is a standby (in recovery)."""
        return _replication.in_recovery(self)

    def timeline(self) -> int:
        """Read the server's current timeline (1 after initdb, 2 after the first promotion)."""
        return _replication.timeline(self)

    def standbys(self) -> list[ThrowawayCluster]:
        """Return the standbys created from this cluster (stopped with it)."""
        return list(self._standbys)

    # -- internals -----------------------------------------------------------------------------

    def _create_base_dir(self) -> None:
        uid, gid = run_as(self.os_user)
        if self.faketime:
            find_faketime_library()  # fail early, with the install hint, before creating files
        self._base = Path(tempfile.mkdtemp(prefix=f"{self.name}-pg-", dir=self._base_parent))
        _LIVE[self] = os.getpid()
        (self._base / "socket").mkdir()
        for folder in (self._base, self._base / "socket"):
            if uid is not None and gid is not None:
                os.chown(folder, uid, gid)
            folder.chmod(0o700)
        if self.faketime:
            self._write_clock_file()

    def _initdb(self) -> None:
        try:
            initdb(
                self.bin_dir,
                self.data_dir,
                self.base_dir,
                superuser=self.superuser,
                password=self.superuser_password,
                os_user=self.os_user,
                durable=self.durable,
            )
        except ThrowawayClusterError as exc:
            raise ThrowawayClusterError(f"cluster {self.name!r}: {exc}") from exc

    def _write_settings(self) -> None:
        write_settings(self.data_dir, self._settings, durable=self.durable, faketime=self.faketime)

    def _server_env(self) -> dict[str, str]:
        env = tool_env(self.base_dir)
        if self.faketime:
            env.update(faketime_env(self.base_dir))
        return env

    def _start_on_free_port(self) -> None:
        for _ in range(_PORT_ATTEMPTS):
            if self._launch(free_port()):
                return
        raise self._start_error(f"no free port after {_PORT_ATTEMPTS} attempts")

    def _launch(self, port: int) -> bool:
        """Start the postmaster on `port`; False if it failed for a retryable reason."""
        self._port = port
        argv = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(port)]
        argv += ["-k", str(self.base_dir / "socket")]
        self._proc = spawn_server(
            argv,
            cwd=self.base_dir,
            os_user=self.os_user,
            env=self._server_env(),
            log_path=self.log_path,
        )
        return self._wait_ready(self._proc)

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                if any(marker in log_tail(self.log_path) for marker in _RETRYABLE_START_ERRORS):
                    return False
                raise self._start_error(f"server exited with code {proc.returncode}")
            with contextlib.suppress(psycopg.OperationalError), self.connect() as conn:
                conn.execute(ddl("cluster_ping"))
                return True
            if time.monotonic() > deadline:
                self._halt()
                raise self._start_error(f"server not ready after {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def _halt(self, *, crash: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_server(proc, crash=crash)

    def _start_error(self, reason: str) -> ThrowawayClusterError:
        return ThrowawayClusterError(
            f"cluster {self.name!r}: {reason}; server log tail ({self._base}):\n"
            f"{log_tail(self.log_path) if self._base else '(no folder)'}"
        )

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port else "not started"
        return f"ThrowawayCluster(name={self.name!r}, {where}, faketime={self.faketime})"
