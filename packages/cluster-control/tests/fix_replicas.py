"""`ql3 run` replicas as real processes for the cluster-control tests (the `replicas` fixture)."""

from __future__ import annotations

import functools
import signal
import subprocess
from collections.abc import Iterator  # noqa: TC003  # pytest resolves fixture annotations
from dataclasses import dataclass, field
from pathlib import Path  # noqa: TC003  # a dataclass field and a fixture annotation

import pytest
from fix_db import clean_env, json_records, kill_leftovers, ql3_executable, wait_for


@dataclass
class Replicas:
    """`ql3 run` processes started by a test; all are stopped at the end, also on failure."""

    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self,
        name: str,
        dsn: str,
        *args: str,
        preload: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start replica `name` (its owner id) against `dsn`, optionally with env additions."""
        env = clean_env(QL3_DSN=dsn, **(preload or {}))
        log = (self.workdir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [*ql3_executable(), "run", "--owner-id", name, "--log-format", "json", *args],
            env=env,
            stdout=log,
            stderr=log,
        )
        log.close()
        self.processes[name] = process
        return process

    def log(self, name: str) -> str:
        """Return the replica's output so far."""
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def logged(self, name: str, event: str) -> bool:
        """Tell whether the replica's JSON log has a record with this `event`."""
        return any(record.get("event") == event for record in json_records(self.log(name)))

    def wait_ready(self, *names: str, timeout_s: float = 60) -> None:
        """Wait until each replica logged that it connected (start-up is slow on a busy host)."""
        for name in names:
            wait_for(
                functools.partial(self.logged, name, "service.connected"),
                timeout_s=timeout_s,
                what=f"replica {name} connected",
            )

    def terminate(self, name: str, timeout: float = 20) -> int:
        """SIGTERM a replica and return its exit code."""
        process = self.processes[name]
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=timeout)

    def kill(self, name: str) -> None:
        """SIGKILL a replica (a crash)."""
        process = self.processes[name]
        process.kill()
        process.wait(timeout=20)

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every running replica and wait; returns exit codes of those it stopped."""
        codes: dict[str, int] = {}
        running = {name: p for name, p in self.processes.items() if p.poll() is None}
        for process in running.values():
            process.send_signal(signal.SIGTERM)
        for name, process in running.items():
            try:
                codes[name] = process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = process.wait()
        return codes


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    """Start `ql3 run` replicas; any still running at the end are killed."""
    group = Replicas(tmp_path)
    try:
        yield group
    finally:
        kill_leftovers(group.processes)
