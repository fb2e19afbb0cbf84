"""What a Patroni test cluster is made of: binaries, free ports, a member's folder, its REST API.

`patroni_bin_dir` and `etcd_executable` find the binaries (or fail with the install hint),
`free_ports` picks loopback ports, `PatroniMember` is one member's ports, folder and process, and
`http_json` asks Patroni's REST API or etcd's JSON gateway. The settings every member bootstraps
with (`DCS`, `PARAMETERS`) live here beside them; `_patroni.PatroniCluster` puts them together.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import ThrowawayClusterError

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

HOST = "127.0.0.1"
SCOPE = "ql3"
SUPERUSER = "postgres"
REPLICATION_USER = "replicator"
DEFAULT_PATRONI_VENV = Path("/opt/ql3-patroni")
INSTALL_HINT = "run scripts/setup.sh as root (apt etcd-server; Patroni in /opt/ql3-patroni)"
# Ports below the ephemeral range (32768-60999), where client sockets could take them.
_PORT_RANGE = (20_000, 32_000)
_HTTP_TIMEOUT_S = 2.0
# Patroni refuses a ttl under 20; loop_wait 2 makes each member act within ~2 s.
DCS = {
    "ttl": 20,
    "loop_wait": 2,
    "retry_timeout": 5,
    "primary_start_timeout": 0,
    "synchronous_mode": True,
}
# Server settings belong in bootstrap.dcs (set per member they are ignored). fsync off keeps the
# tests fast (a process kill loses nothing); full_page_writes stays on for pg_rewind.
PARAMETERS = {
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


def http_json(url: str, post: Mapping[str, object] | None = None) -> object | None:
    """GET (or POST `post` to) `url` and parse its JSON; None when nothing answers."""
    data = None if post is None else json.dumps(post).encode()
    try:
        request = urllib.request.Request(url, data=data)  # noqa: S310 - loopback only
        with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S) as response:  # noqa: S310
            parsed: object = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return parsed
