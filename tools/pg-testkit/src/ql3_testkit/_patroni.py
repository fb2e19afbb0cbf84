"""A Patroni cluster for tests: one etcd member and three PostgreSQL members, all on loopback.

QL3 has no leader of its own, so it is exactly as available as the PostgreSQL cluster under it;
operators run that cluster with an HA manager, most often Patroni with etcd. `PatroniCluster`
starts the real thing in a private temporary folder (`synchronous_mode: true`, `pg_rewind`,
`primary_start_timeout: 0` so a killed postmaster fails over instead of restarting in place) and
offers the faults the chaos suite needs: a `patronictl switchover`, a SIGKILL of the leader's
postmaster, a SIGKILL of a member's Patroni (its postmaster lives on) and that member's rejoin.

State is read from Patroni's REST API (`GET /cluster`), never from `patronictl` (each call costs
about 1.4 s of CPU) and never from a standby's control file (its timeline lags). Every wait polls
against a monotonic deadline. Binaries: Debian's `etcd-server` and Patroni in its own venv built
from the system Python (`scripts/setup.sh` installs both; `QL3_PATRONI_VENV` names another
venv).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from ql3_cluster_postgres import find_postgres_bin_dir

from ._crash import children_of, wait_gone
from ._errors import ThrowawayClusterError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import TracebackType

__all__ = ["PatroniCluster", "PatroniMember", "durable_write", "durable_write_acknowledged_ms"]

HOST = "127.0.0.1"
SCOPE = "ql3"
SUPERUSER = "postgres"
REPLICATION_USER = "replicator"
DEFAULT_PATRONI_VENV = Path("/opt/ql3-patroni")
INSTALL_HINT = "run scripts/setup.sh as root (apt etcd-server; Patroni in /opt/ql3-patroni)"
# Ports below the ephemeral range (32768-60999), where client sockets could take them.
_PORT_RANGE = (20_000, 32_000)
_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 30.0
_POLL_S = 0.1
_HTTP_TIMEOUT_S = 2.0
_WRITE_TIMEOUT_S = 2.0
# Patroni refuses a ttl under 20; loop_wait 2 makes each member act within ~2 s.
_DCS = {
    "ttl": 20,
    "loop_wait": 2,
    "retry_timeout": 5,
    "primary_start_timeout": 0,
    "synchronous_mode": True,
}
# Server settings belong in bootstrap.dcs (set per member they are ignored). fsync off keeps the
# tests fast (a process kill loses nothing); full_page_writes stays on for pg_rewind.
_PARAMETERS = {
    "max_connections": 100,
    "max_wal_senders": 10,
    "max_replication_slots": 10,
    "wal_level": "replica",
    "hot_standby": "on",
    "wal_keep_size": "128MB",
    "fsync": "off",
    "synchronous_commit": "on",
    "wal_log_hints": "on",
}


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """Pick `count` distinct loopback ports below the ephemeral range that are free now."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(*_PORT_RANGE)  # noqa: S311 - not cryptography
        if port not in chosen and _port_free(port):
            chosen.append(port)
    return chosen


def patroni_bin_dir() -> Path:
    """Return the folder holding `patroni` and `patronictl`, or fail with the install hint."""
    folder = Path(os.environ.get("QL3_PATRONI_VENV", str(DEFAULT_PATRONI_VENV))) / "bin"
    if not (folder / "patroni").exists() or not (folder / "patronictl").exists():
        raise ThrowawayClusterError(f"Patroni not found in {folder}: {INSTALL_HINT}")
    return folder


def etcd_executable() -> Path:
    """Return the `etcd` server binary, or fail with the install hint."""
    found = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None)
    if found is None:
        raise ThrowawayClusterError(f"etcd not found: {INSTALL_HINT}")
    return Path(found)


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


@dataclass
class PatroniMember:
    """One Patroni member: its ports, folder and (while it runs) its Patroni process."""

    __module__ = "ql3_testkit"

    name: str
    pg_port: int
    api_port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.folder / "patroni.log"

    @property
    def config_path(self) -> Path:
        """The member's Patroni YAML (JSON, which YAML reads) configuration."""
        return self.folder / "patroni.yml"

    @property
    def data_dir(self) -> Path:
        """The member's PostgreSQL data directory."""
        return self.folder / "data"

    @property
    def patroni_alive(self) -> bool:
        """True while this member's Patroni process runs."""
        return self.process is not None and self.process.poll() is None

    def postmaster_pid(self) -> int | None:
        """Return the running postmaster's PID from `postmaster.pid` (None when none runs)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid


class PatroniCluster:
    """Three PostgreSQL members managed by Patroni with one etcd; torn down by `stop()`.

    Use as a context manager. `dsn()` is the multi-host conninfo clients use
    (`target_session_attrs=read-write` finds the leader); `member_dsn(name)` reaches one member.
    `connect`, `dsn` and `superuser_password` match `ThrowawayCluster`, so
    `prepare_ql3_database` works on it. `keep=True` leaves the folder for post-mortems.
    """

    __module__ = "ql3_testkit"

    def __init__(
        self,
        *,
        members: int = 3,
        bin_dir: Path | None = None,
        os_user: str = "postgres",
        parameters: Mapping[str, object] | None = None,
        keep: bool = False,
    ) -> None:
        self.os_user = os_user
        self.keep = keep
        self.superuser_password = secrets.token_hex(16)
        self.replication_password = secrets.token_hex(16)
        self.parameters: dict[str, object] = {**_PARAMETERS, **(parameters or {})}
        self._member_count = members
        self._bin_dir = bin_dir
        self._base: Path | None = None
        self._etcd: subprocess.Popen[bytes] | None = None
        self._etcd_port = 0
        self.members: list[PatroniMember] = []

    # -- life cycle ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_dir(self) -> Path:
        """The cluster's private temporary folder."""
        if self._base is None:
            raise ThrowawayClusterError("Patroni cluster: not started")
        return self._base

    def start(self) -> Self:
        """Start etcd and every member; return once the leader accepts writes and all stream."""
        patroni_bin_dir()
        etcd = etcd_executable()
        bin_dir = self._bin_dir or find_postgres_bin_dir()
        uid, gid = self._ids()
        try:
            self._base = Path(tempfile.mkdtemp(prefix="ql3-patroni-"))
            self._base.chmod(0o755)
            self._start_etcd(etcd)
            ports = free_ports(2 * self._member_count)
            for index in range(self._member_count):
                folder = self._base / f"m{index + 1}"
                folder.mkdir(mode=0o700)
                os.chown(folder, uid, gid)
                member = PatroniMember(
                    name=f"m{index + 1}",
                    pg_port=ports[2 * index],
                    api_port=ports[2 * index + 1],
                    folder=folder,
                )
                self._write_config(member, bin_dir)
                self.members.append(member)
            for member in self.members:
                self.start_patroni(member.name)
            self.wait_healthy(timeout_s=_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every Patroni (it stops its postmaster), any postmaster left, etcd; remove all.

        Idempotent, never raises for what is already gone.
        """
        for member in self.members:
            self._stop_member(member)
        if self._etcd is not None and self._etcd.poll() is None:
            self._etcd.kill()
            self._etcd.wait()
        self._etcd = None
        self.members = []
        if self._base is not None and not self.keep:
            shutil.rmtree(self._base, ignore_errors=True)
        self._base = None

    def _stop_member(self, member: PatroniMember) -> None:
        process = member.process
        if process is not None and process.poll() is None:
            process.terminate()  # Patroni stops its postmaster on SIGTERM
            try:
                process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        pid = member.postmaster_pid()
        if pid is not None:  # Patroni was killed earlier, or did not stop it in time
            children = children_of(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_gone([pid, *children])

    def _ids(self) -> tuple[int, int]:
        import pwd  # noqa: PLC0415 - only where the OS user matters

        if os.geteuid() != 0:
            return os.getuid(), os.getgid()
        try:
            entry = pwd.getpwnam(self.os_user)
        except KeyError as exc:
            msg = f"Patroni cluster: OS user {self.os_user!r} does not exist"
            raise ThrowawayClusterError(msg) from exc
        return entry.pw_uid, entry.pw_gid

    def _start_etcd(self, etcd: Path) -> None:
        client, peer = free_ports(2)
        self._etcd_port = client
        folder = self.base_dir / "etcd"
        argv = [
            str(etcd),
            "--name=e1",
            f"--data-dir={folder}",
            f"--listen-client-urls=http://{HOST}:{client}",
            f"--advertise-client-urls=http://{HOST}:{client}",
            f"--listen-peer-urls=http://{HOST}:{peer}",
            f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
            f"--initial-cluster=e1=http://{HOST}:{peer}",
        ]
        with (self.base_dir / "etcd.log").open("ab") as log:
            self._etcd = subprocess.Popen(  # noqa: S603 - fixed binary, our own arguments
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        url = f"http://{HOST}:{client}/health"
        self._wait(lambda: _http_json(url) is not None, 30.0, "etcd is healthy")

    def _write_config(self, member: PatroniMember, bin_dir: Path) -> None:
        sockets = member.folder / "sockets"
        sockets.mkdir()
        os.chown(sockets, *self._ids())
        config: dict[str, Any] = {
            "scope": SCOPE,
            "name": member.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"{HOST}:{member.api_port}",
                "connect_address": f"{HOST}:{member.api_port}",
            },
            "etcd3": {"hosts": [f"{HOST}:{self._etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    **_DCS,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": self.parameters,
                    },
                },
                "initdb": [
                    "data-checksums",
                    {"auth-host": "scram-sha-256"},
                    {"auth-local": "trust"},
                ],
            },
            "postgresql": {
                "listen": f"{HOST}:{member.pg_port}",
                "connect_address": f"{HOST}:{member.pg_port}",
                "data_dir": str(member.data_dir),
                "bin_dir": str(bin_dir),
                "pgpass": str(member.folder / "pgpass"),
                "authentication": {
                    "superuser": {"username": SUPERUSER, "password": self.superuser_password},
                    "replication": {
                        "username": REPLICATION_USER,
                        "password": self.replication_password,
                    },
                },
                "parameters": {"unix_socket_directories": str(sockets)},
                "pg_hba": [
                    "local all all trust",
                    f"host replication {REPLICATION_USER} {HOST}/32 scram-sha-256",
                    f"host all all {HOST}/32 scram-sha-256",
                ],
            },
        }
        member.config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
        os.chown(member.config_path, *self._ids())

    # -- members -------------------------------------------------------------------------------

    def member(self, name: str) -> PatroniMember:
        """Return the member called `name` (m1, m2, m3)."""
        for member in self.members:
            if member.name == name:
                return member
        raise ThrowawayClusterError(f"Patroni cluster: no member {name!r}")

    def start_patroni(self, name: str) -> None:
        """Start (or restart) member `name`'s Patroni; it rejoins with pg_rewind when needed."""
        member = self.member(name)
        uid, gid = self._ids()
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PG", "LD_PRELOAD", "FAKETIME", "VIRTUAL_ENV", "PYTHON"))
        }
        env.update({"HOME": str(member.folder), "LC_ALL": "C.UTF-8"})
        argv = [str(patroni_bin_dir() / "patroni"), str(member.config_path)]
        with member.log_path.open("ab") as log:
            member.process = subprocess.Popen(  # noqa: S603 - fixed binary, our own arguments
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=member.folder,
                env=env,
                user=uid,
                group=gid,
                extra_groups=[] if os.geteuid() == 0 else None,
                start_new_session=True,
            )

    def kill_patroni(self, name: str) -> None:
        """SIGKILL member `name`'s Patroni; its postmaster keeps running (and accepting writes)."""
        process = self.member(name).process
        if process is None or process.poll() is not None:
            raise ThrowawayClusterError(f"Patroni cluster: {name}'s Patroni is not running")
        process.kill()
        process.wait()

    def kill_postmaster(self, name: str) -> int:
        """SIGKILL member `name`'s postmaster (Patroni lives on); return the killed PID."""
        pid = self.member(name).postmaster_pid()
        if pid is None:
            raise ThrowawayClusterError(f"Patroni cluster: {name} has no running postmaster")
        children = children_of(pid)
        os.kill(pid, signal.SIGKILL)
        wait_gone([pid, *children])
        return pid

    # -- state from the REST API ---------------------------------------------------------------

    def state(self) -> dict[str, dict[str, Any]]:
        """Members as Patroni's `GET /cluster` reports them, by name (asks each member in turn)."""
        for member in self.members:
            if not member.patroni_alive:
                continue
            body = _http_json(f"http://{HOST}:{member.api_port}/cluster")
            if isinstance(body, dict):
                return {str(m["name"]): m for m in body.get("members", [])}
        return {}

    def leader(self) -> str | None:
        """Name the member Patroni reports as the running leader (None during a change)."""
        for name, info in self.state().items():
            if info.get("role") == "leader" and info.get("state") == "running":
                return name
        return None

    def timeline(self) -> int:
        """Return the leader's timeline as Patroni reports it (a standby's control file lags)."""
        name = self.leader()
        if name is None:
            raise ThrowawayClusterError("Patroni cluster: no leader to read the timeline from")
        return int(self.state()[name].get("timeline", 0))

    def sync_state(self) -> dict[str, Any]:
        """Patroni's `/sync` key read from etcd: {"leader": ..., "sync_standby": ...} or {}.

        Patroni fails over only to a member this key names for the current leader; `GET
        /cluster` shows the role from the key without checking its leader, so a stale key
        there looks healthy. Read it through etcd's v3 JSON gateway.
        """
        key = base64.b64encode(f"/service/{SCOPE}/sync".encode()).decode()
        body = _http_json(f"http://{HOST}:{self._etcd_port}/v3/kv/range", {"key": key})
        if not isinstance(body, dict) or not body.get("kvs"):
            return {}
        value = json.loads(base64.b64decode(body["kvs"][0]["value"]))
        return value if isinstance(value, dict) else {}

    def sync_standby(self) -> str | None:
        """Name the synchronous standby Patroni recorded for the current leader, if any."""
        sync = self.sync_state()
        leader = self.leader()
        if leader is None or sync.get("leader") != leader:
            return None
        standby = sync.get("sync_standby")
        return str(standby) if standby else None

    def healthy(self) -> bool:
        """Tell whether a leader accepts durable writes and every other member streams."""
        members = self.state()
        leader = self.leader()
        if leader is None or len(members) != len(self.members):
            return False
        streaming = all(
            info.get("state") == "streaming" for name, info in members.items() if name != leader
        )
        return streaming and self.sync_standby() is not None and durable_write(self.dsn())

    # -- waits and faults ----------------------------------------------------------------------

    def wait_healthy(self, *, timeout_s: float = 60.0) -> float:
        """Wait until `healthy()`; return the seconds waited."""
        return self._wait(self.healthy, timeout_s, "every member is healthy")

    def wait_new_leader(
        self, old: str, *, since: float | None = None, timeout_s: float = 60.0
    ) -> tuple[str, float]:
        """Wait until a member other than `old` leads and accepts durable writes.

        Returns the new leader's name and the seconds from `since` (a `time.monotonic()` taken
        just before the fault; default: this call) until its first durable write.
        """
        start = time.monotonic() if since is None else since
        found: list[str] = []

        def ready() -> bool:
            leader = self.leader()
            if leader is None or leader == old:
                return False
            if not durable_write(self.member_dsn(leader)):
                return False
            found.append(leader)
            return True

        self._wait(ready, timeout_s, f"a leader other than {old} accepts writes")
        return found[-1], time.monotonic() - start

    def wait_member_streaming(self, name: str, *, timeout_s: float = 90.0) -> float:
        """Wait until member `name` is back as a streaming replica on the leader's timeline."""

        def streaming() -> bool:
            members = self.state()
            leader = self.leader()
            info = members.get(name)
            if info is None or leader is None or leader == name:
                return False
            same_timeline = info.get("timeline") == members[leader].get("timeline")
            return info.get("state") == "streaming" and same_timeline

        return self._wait(streaming, timeout_s, f"member {name} streams from the leader")

    def switchover(self, candidate: str | None = None) -> str:
        """Run `patronictl switchover --force` away from the current leader; return the old one."""
        leader = self.leader()
        if leader is None:
            raise ThrowawayClusterError("Patroni cluster: no leader to switch over from")
        argv = [
            str(patroni_bin_dir() / "patronictl"),
            "-c",
            str(self.member(leader).config_path),
            "switchover",
            "--leader",
            leader,
            "--force",
        ]
        if candidate is not None:
            argv += ["--candidate", candidate]
        result = subprocess.run(  # noqa: S603 - fixed binary, our own arguments
            argv, capture_output=True, text=True, timeout=60, check=False
        )
        if result.returncode != 0:
            msg = f"patronictl switchover failed: {(result.stderr or result.stdout).strip()}"
            raise ThrowawayClusterError(msg)
        return leader

    def kill_leader_postmaster(self) -> str:
        """SIGKILL the leader's postmaster (Patroni then fails over); return the old leader."""
        leader = self.leader()
        if leader is None:
            raise ThrowawayClusterError("Patroni cluster: no leader whose postmaster to kill")
        self.kill_postmaster(leader)
        return leader

    # -- connecting ----------------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres", **params: str) -> str:
        """Multi-host superuser conninfo: every member, `target_session_attrs=read-write`."""
        hosts = ",".join(HOST for _ in self.members)
        ports = ",".join(str(member.pg_port) for member in self.members)
        options: dict[str, str] = {
            "target_session_attrs": "read-write",
            "user": SUPERUSER,
            "password": self.superuser_password,
            "connect_timeout": "2",
            **params,
        }
        return make_conninfo("", host=hosts, port=ports, dbname=dbname, **options)

    def member_dsn(self, name: str, dbname: str = "postgres", **params: str) -> str:
        """Superuser conninfo of one member."""
        member = self.member(name)
        options = {"user": SUPERUSER, "password": self.superuser_password, **params}
        return make_conninfo(
            "", host=HOST, port=str(member.pg_port), dbname=dbname, connect_timeout="2", **options
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        """Open an autocommit superuser connection to the leader (set-up work only)."""
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    # -- helpers -------------------------------------------------------------------------------

    def _wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        started = time.monotonic()
        deadline = started + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise ThrowawayClusterError(
                    f"Patroni cluster: timed out after {timeout_s:.0f} s waiting until {what}"
                    f"; state {self.state()}"
                )
            time.sleep(_POLL_S)
        return time.monotonic() - started

    def __repr__(self) -> str:
        ports = [member.pg_port for member in self.members]
        return f"PatroniCluster(ports={ports}, etcd={self._etcd_port})"


def _http_json(url: str, post: Mapping[str, object] | None = None) -> object | None:
    """GET (or POST `post` to) `url` and parse its JSON; None when nothing answers."""
    data = None if post is None else json.dumps(post).encode()
    try:
        request = urllib.request.Request(url, data=data)  # noqa: S310 - loopback only
        with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S) as response:  # noqa: S310
            parsed: object = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return parsed
