"""A Patroni cluster for tests: one etcd member and three PostgreSQL members, all on loopback.

QL3 has no leader of its own, so it is exactly as available as the PostgreSQL cluster under it;
operators run that cluster with an HA manager, most often Patroni with etcd. `PatroniCluster`
starts the real thing in a private temporary folder (`synchronous_mode: true`, `pg_rewind`,
`primary_start_timeout: 0` so a killed postmaster fails over instead of restarting in place) and
offers the faults the chaos suite needs: a `patronictl switchover`, a SIGKILL of the leader's
postmaster, a SIGKILL of a member's Patroni (its postmaster lives on) and that member's rejoin.

This module holds the processes (etcd, each member's Patroni, the members' configuration) and the
faults; reading the cluster's state and waiting on it is `_patroni_view.PatroniView`, its base
class, and the binaries, ports and member folders are `_patroni_setup`. Binaries: Debian's
`etcd-server` and Patroni in its own venv built from the system Python (`scripts/setup.sh` installs
both; `QL3_PATRONI_VENV` names another venv).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ql3_cluster_postgres import find_postgres_bin_dir

from ._crash import children_of, wait_gone
from ._errors import ThrowawayClusterError
from ._patroni_setup import (
    DCS,
    HOST,
    PARAMETERS,
    REPLICATION_USER,
    SCOPE,
    SUPERUSER,
    PatroniMember,
    etcd_executable,
    free_ports,
    http_json,
    patroni_bin_dir,
)
from ._patroni_view import PatroniView

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

__all__ = ["PatroniCluster"]

_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 30.0


class PatroniCluster(PatroniView):
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
        self.parameters: dict[str, object] = {**PARAMETERS, **(parameters or {})}
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
        self._wait(lambda: http_json(url) is not None, 30.0, "etcd is healthy")

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
                    **DCS,
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
