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

Fencing: `fence()` stops the server immediately and renames `postgresql.conf` to
`postgresql.conf.fenced`; PostgreSQL then refuses to start from that data dir ("could not access the
server configuration file"), which is exactly what a fenced old primary must do.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ._binaries import find_faketime_library, find_postgres_bin_dir
from ._ddl import ddl
from ._errors import ThrowawayClusterError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType

__all__ = ["ThrowawayCluster"]

_HOST = "127.0.0.1"
_SUPERUSER = "postgres"
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_PORT_ATTEMPTS = 5
_LOG_TAIL_LINES = 40
# Settings every throwaway cluster gets; standbys and failover tests need the replication ones.
_BASE_SETTINGS: Mapping[str, str] = {
    "listen_addresses": _HOST,
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "hot_standby": "on",
    "wal_keep_size": "128MB",
    "shared_buffers": "32MB",
    "max_connections": "100",
    "jit": "off",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "log_line_prefix": "%m [%p] %q%a ",
}
_NON_DURABLE_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
_FAKETIME_SETTINGS: Mapping[str, str] = {"max_parallel_workers_per_gather": "0"}
# Startup failures worth retrying: a port taken meanwhile, or a crashed predecessor's leftovers.
_RETRYABLE_START_ERRORS = ("Address already in use", "could not bind", "is still in use")

_LIVE: set[ThrowawayCluster] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    """Safety net: never leave servers or folders behind, even when a test forgot to stop one."""
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _conf_line(key: str, value: str) -> str:
    escaped = value.replace("'", "''")
    return f"{key} = '{escaped}'\n"


def _children_of(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (read from /proc, so it also works after the parent died)."""
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            # Field 4 (ppid) follows the parenthesised command name, which may contain spaces.
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    """Tell whether `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout_s
        time.sleep(0.02)


class ThrowawayCluster:
    """A private PostgreSQL server in a temporary folder; always stopped and removed after use.

    Use as a context manager or call `start()` / `stop()`. See the module docstring for faketime
    and fencing. `durable=False` turns fsync, full_page_writes and synchronous_commit off (fast
    tests; a crash may lose data, which tests that kill servers must keep in mind).
    """

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
        self.keep = keep
        self.host = _HOST
        self.superuser = _SUPERUSER
        self.superuser_password = secrets.token_hex(16)
        self._settings = dict(settings or {})
        self._bin_dir = bin_dir
        self._base_parent = base_dir
        self._os_user = os_user
        self._base: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._clock_offset_ms = 0
        self._standbys: list[ThrowawayCluster] = []
        self._fenced = False

    # -- public properties -------------------------------------------------------------------

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

        Idempotent; also safe after a failed start, `kill()` or `fence()`.
        """
        for standby in self._standbys:
            standby.stop()
        self._standbys.clear()
        self._shutdown_immediate()
        if self._base is not None and not self.keep:
            shutil.rmtree(self._base, ignore_errors=True)
        self._base = None
        _LIVE.discard(self)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def kill(self) -> None:
        """Crash the server: SIGKILL the postmaster; its backends die as they notice."""
        if not self.running:
            return
        pid = self.pid
        children = _children_of(pid)
        os.kill(pid, signal.SIGKILL)
        assert self._proc is not None  # noqa: S101 - running implies a process
        self._proc.wait()
        # Backends exit on postmaster death; wait so a restart finds no stale shared memory.
        _wait_gone(children, _STOP_TIMEOUT_S)

    def restart(self) -> None:
        """Start the server again on the same port (after `kill()`, or a stop/start cycle)."""
        self._shutdown_immediate()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._launch(self.port):
            if time.monotonic() > deadline:
                raise self._start_error(f"port {self.port} stayed busy")
            time.sleep(0.2)

    def fence(self) -> None:
        """Stop the server immediately and make every later start from this data dir fail."""
        self._shutdown_immediate()
        conf = self.data_dir / "postgresql.conf"
        if conf.exists():
            conf.rename(conf.with_name("postgresql.conf.fenced"))
        self._fenced = True

    @property
    def fenced(self) -> bool:
        """True once `fence()` ran."""
        return self._fenced

    # -- clock ---------------------------------------------------------------------------------

    def set_clock_offset_ms(self, offset_ms: int) -> None:
        """Set the database clock to real time + `offset_ms`, live: open sessions see it at once."""
        if not self.faketime:
            raise ThrowawayClusterError(
                f"cluster {self.name!r}: set_clock_offset_ms needs ThrowawayCluster(faketime=True)"
            )
        self._clock_offset_ms = offset_ms
        self._write_clock_file()

    @property
    def clock_offset_ms(self) -> int:
        """The offset last set with `set_clock_offset_ms` (0 at start)."""
        return self._clock_offset_ms

    def _write_clock_file(self) -> None:
        # libfaketime 0.9.10 reads "+1.500" / "-30.000" as a relative offset in (fractional)
        # seconds; os.replace makes the change atomic for a reader in the middle of a call.
        sign = "-" if self._clock_offset_ms < 0 else "+"
        magnitude = abs(self._clock_offset_ms)
        target = self.base_dir / "faketime.rc"
        scratch = self.base_dir / "faketime.rc.tmp"
        scratch.write_text(f"{sign}{magnitude // 1000}.{magnitude % 1000:03d}\n")
        scratch.chmod(0o644)
        scratch.replace(target)

    # -- replication ---------------------------------------------------------------------------

    def create_standby(self, *, synchronous: bool = False) -> ThrowawayCluster:
        """Clone this server with `pg_basebackup -R`, start it and wait until it streams.

        The standby has its own folder, port and (with faketime) its own clock file starting at
        this cluster's offset. `synchronous=True` makes it the synchronous standby and turns
        synchronous_commit on here, so commits wait for it. `stop()` here also stops it.
        """
        index = len(self._standbys) + 1
        standby = ThrowawayCluster(
            faketime=self.faketime,
            settings=self._settings,
            bin_dir=self.bin_dir,
            base_dir=self._base_parent,
            durable=self.durable,
            name=f"{self.name}_standby{index}",
            os_user=self._os_user,
            keep=self.keep,
        )
        standby.superuser_password = self.superuser_password
        standby._clock_offset_ms = self._clock_offset_ms
        self._standbys.append(standby)
        standby._start_from_base_backup(self)
        if synchronous:
            with self._connect() as conn:
                names = sql.SQL(ddl("cluster_set_synchronous")).format(
                    names=sql.Literal(standby.name)
                )
                conn.execute(names)
                conn.execute(ddl("cluster_synchronous_commit_on"))
                conn.execute(ddl("cluster_reload"))
        self._wait_standby(standby.name, "sync" if synchronous else None)
        return standby

    def promote(self) -> None:
        """Promote this standby (pg_ctl promote) and wait until it accepts writes."""
        self._run([str(self.bin_dir / "pg_ctl"), "promote", "-w", "-D", str(self.data_dir)])
        deadline = time.monotonic() + _START_TIMEOUT_S
        while self.in_recovery():
            if time.monotonic() > deadline:
                raise self._start_error("promotion did not finish")
            time.sleep(0.05)

    def in_recovery(self) -> bool:
        """Tell whether the server is a standby (in recovery)."""
        with self._connect() as conn:
            row = conn.execute(ddl("cluster_in_recovery")).fetchone()
        return bool(row and row[0])

    def timeline(self) -> int:
        """Read the server's current timeline (1 after initdb, 2 after the first promotion)."""
        with self._connect() as conn:
            in_recovery = conn.execute(ddl("cluster_in_recovery")).fetchone()
            if in_recovery and in_recovery[0]:
                row = conn.execute(ddl("cluster_timeline_standby")).fetchone()
                return int(row[0]) if row else 0
            row = conn.execute(ddl("cluster_timeline_primary")).fetchone()
        if row is None:
            raise ThrowawayClusterError(f"cluster {self.name!r}: no WAL file name")
        return int(str(row[0])[:8], 16)

    # -- internals -----------------------------------------------------------------------------

    def _connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.dsn(dbname), autocommit=True, connect_timeout=10)

    def _run_as(self) -> tuple[int | None, int | None]:
        if os.geteuid() != 0:
            return None, None
        try:
            entry = pwd.getpwnam(self._os_user)
        except KeyError as exc:
            raise ThrowawayClusterError(
                f"running as root, PostgreSQL needs an unprivileged OS user; user"
                f" {self._os_user!r} does not exist (create it: `useradd --system {self._os_user}`)"
            ) from exc
        return entry.pw_uid, entry.pw_gid

    def _env(self, *, preload: bool = False) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PG", "LD_PRELOAD", "FAKETIME"))
        }
        env["LC_ALL"] = "C"
        env["HOME"] = str(self.base_dir)
        if preload and self.faketime:
            env["LD_PRELOAD"] = str(find_faketime_library())
            env["FAKETIME_TIMESTAMP_FILE"] = str(self.base_dir / "faketime.rc")
            env["FAKETIME_NO_CACHE"] = "1"
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env

    def _run(self, argv: list[str], *, env: Mapping[str, str] | None = None) -> str:
        uid, gid = self._run_as()
        result = subprocess.run(  # noqa: S603 - argv built from fixed tool names
            argv,
            capture_output=True,
            text=True,
            cwd=self.base_dir,
            env=dict(env) if env is not None else self._env(),
            user=uid,
            group=gid,
            extra_groups=[] if uid is not None else None,
            timeout=_START_TIMEOUT_S * 2,
            check=False,
        )
        if result.returncode != 0:
            raise ThrowawayClusterError(
                f"cluster {self.name!r}: {Path(argv[0]).name} failed with exit code"
                f" {result.returncode}: {(result.stderr or result.stdout).strip()}"
            )
        return result.stdout

    def _create_base_dir(self) -> None:
        uid, gid = self._run_as()
        if self.faketime:
            find_faketime_library()  # fail early with the install hint
        self._base = Path(tempfile.mkdtemp(prefix=f"{self.name}-pg-", dir=self._base_parent))
        _LIVE.add(self)
        if uid is not None and gid is not None:
            os.chown(self._base, uid, gid)
        self._base.chmod(0o700)
        (self._base / "socket").mkdir(mode=0o700)
        if uid is not None and gid is not None:
            os.chown(self._base / "socket", uid, gid)
        if self.faketime:
            self._write_clock_file()

    def _initdb(self) -> None:
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(self.superuser_password + "\n")
        uid, gid = self._run_as()
        if uid is not None and gid is not None:
            os.chown(pwfile, uid, gid)
        pwfile.chmod(0o600)
        argv = [
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.superuser,
            f"--pwfile={pwfile}",
            "--auth-local=scram-sha-256",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--data-checksums",  # pg_rewind and checksum verification need them
        ]
        if not self.durable:
            argv.append("--no-sync")
        try:
            self._run(argv)
        finally:
            pwfile.unlink(missing_ok=True)

    def _write_settings(self) -> None:
        settings: dict[str, str] = dict(_BASE_SETTINGS)
        if not self.durable:
            settings.update(_NON_DURABLE_SETTINGS)
        if self.faketime:
            settings.update(_FAKETIME_SETTINGS)
        settings.update(self._settings)
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# --- ql3 throwaway cluster ---\n")
            conf.writelines(_conf_line(key, value) for key, value in settings.items())

    def _start_on_free_port(self) -> None:
        for _ in range(_PORT_ATTEMPTS):
            port = _free_port()
            if self._launch(port):
                return
        raise self._start_error(f"no free port after {_PORT_ATTEMPTS} attempts")

    def _launch(self, port: int) -> bool:
        """Start the postmaster on `port`; False if it failed for a retryable reason."""
        self._port = port
        uid, gid = self._run_as()
        argv = [
            str(self.bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(port),
            "-k",
            str(self.base_dir / "socket"),
        ]
        log: IO[bytes]
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(  # noqa: S603 - fixed binary, our own arguments
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                env=self._env(preload=True),
                user=uid,
                group=gid,
                extra_groups=[] if uid is not None else None,
                start_new_session=True,  # a Ctrl-C in pytest must not hit the server first
            )
        return self._wait_ready()

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT_S
        assert self._proc is not None  # noqa: S101 - set by _launch
        while True:
            if self._proc.poll() is not None:
                tail = self._log_tail()
                if any(marker in tail for marker in _RETRYABLE_START_ERRORS):
                    return False
                raise self._start_error(f"server exited with code {self._proc.returncode}")
            with contextlib.suppress(psycopg.OperationalError), self._connect() as conn:
                conn.execute(ddl("cluster_ping"))
                return True
            if time.monotonic() > deadline:
                self._shutdown_immediate()
                raise self._start_error(f"server not ready after {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def _shutdown_immediate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        children = _children_of(proc.pid)
        proc.send_signal(signal.SIGQUIT)  # immediate shutdown: no checkpoint, like a crash
        try:
            proc.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _wait_gone(children, _STOP_TIMEOUT_S)

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def _start_error(self, reason: str) -> ThrowawayClusterError:
        return ThrowawayClusterError(
            f"cluster {self.name!r}: {reason}; server log tail ({self._base}):\n{self._log_tail()}"
        )

    def _start_from_base_backup(self, primary: ThrowawayCluster) -> None:
        self._create_base_dir()
        try:
            conninfo = primary.dsn("postgres", application_name=self.name)
            argv = [
                str(self.bin_dir / "pg_basebackup"),
                "-D",
                str(self.data_dir),
                "-d",
                conninfo,
                "-X",
                "stream",
                "-R",
                "-C",
                "-S",
                self.name,
                "-c",
                "fast",
            ]
            if not self.durable:
                argv.append("--no-sync")
            self._run(argv)
            self._forget_primary_only_settings()
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise

    def _forget_primary_only_settings(self) -> None:
        # A copied synchronous_standby_names would make the promoted standby wait forever.
        auto = self.data_dir / "postgresql.auto.conf"
        lines = auto.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if not line.startswith("synchronous_standby_names")]
        auto.write_text("".join(kept), encoding="utf-8")

    def _wait_standby(self, name: str, sync_state: str | None) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        with self._connect() as conn:
            while True:
                row = conn.execute(ddl("cluster_standby_state"), {"name": name}).fetchone()
                if row and row[0] == "streaming" and (sync_state is None or row[1] == sync_state):
                    return
                if time.monotonic() > deadline:
                    raise self._start_error(f"standby {name!r} not streaming (state {row})")
                time.sleep(0.05)

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port else "not started"
        return f"ThrowawayCluster(name={self.name!r}, {where}, faketime={self.faketime})"

    def standbys(self) -> Iterator[ThrowawayCluster]:
        """Iterate over the standbys created from this cluster (stopped with it)."""
        return iter(self._standbys)
