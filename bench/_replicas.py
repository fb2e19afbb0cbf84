"""`ql3 run` replicas as the benchmarks start them: processes with JSON logs, read back by field.

A `ReplicaSet` starts one `ql3 run` per owner id, keeps each process's output in a log file, and
reads its JSON log lines back (cycle summaries, serialization retries) for the measurements; the
`ql3` console script is this environment's (cluster-control).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


__all__ = [
    "ReplicaSet",
    "bench_workers",
    "new_work_dir",
    "ql3_executable",
    "ql3_replicas",
]

# The folder holding the `bench` package: the baseline workers import it from there.
_BENCH_ROOT = Path(__file__).resolve().parent.parent


def ql3_executable() -> str:
    """Find the `ql3` console script of this environment (cluster-control), or fail clearly."""
    found = shutil.which("ql3", path=str(Path(sys.executable).parent)) or shutil.which("ql3")
    if found is None:
        msg = (
            "the `ql3` console script is missing: install the workspace with "
            "`uv sync --all-packages --group dev --group bench`"
        )
        raise SystemExit(msg)
    return found


def _find_key(node: object, key: str) -> object:
    """Find `key` in a JSON object, at the top or nested (log formatters differ in nesting)."""
    if isinstance(node, dict):
        if key in node:
            return node[key]
        for value in node.values():
            found = _find_key(value, key)
            if found is not None:
                return found
    return None


@dataclass
class ReplicaSet:
    """Worker processes (`ql3 run` replicas or baseline workers), stopped with SIGTERM.

    `commands` maps an owner id to its command line; output goes to `<log_dir>/<owner>.log`.
    """

    commands: Mapping[str, Sequence[str]]
    log_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)

    @property
    def owners(self) -> list[str]:
        """Owner ids in start order."""
        return list(self.commands)

    def start(self) -> Self:
        """Start every process with its output captured to a file."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("QL3_")}
        env.update({"PYTHONUNBUFFERED": "1", **self.env})
        for owner, command in self.commands.items():
            with (self.log_dir / f"{owner}.log").open("wb") as log:
                self.processes.append(
                    subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT, env=env)
                )
        return self

    @property
    def pids(self) -> list[int]:
        """Process ids of the replicas, in owner order."""
        return [process.pid for process in self.processes]

    def alive(self) -> bool:
        """Tell whether every process is still running."""
        return all(process.poll() is None for process in self.processes)

    def stop(self, timeout_s: float = 15.0) -> list[int | None]:
        """SIGTERM every process (graceful: claims released); SIGKILL what is left after."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.exit_codes = [process.returncode for process in self.processes]
        return self.exit_codes

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        if not self.exit_codes:
            self.stop()

    def log_lines(self, owner: str) -> list[str]:
        """Return the captured output of one process."""
        path = self.log_dir / f"{owner}.log"
        return path.read_text(encoding="utf-8", errors="replace").splitlines()

    def cycle_summaries(self) -> list[dict[str, Any]]:
        """Every JSON log line that carries a cycle summary (`serialization_retries`)."""
        found: list[dict[str, Any]] = []
        for owner in self.owners:
            for line in self.log_lines(owner):
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if _find_key(record, "serialization_retries") is not None:
                    found.append(record)
        return found

    def serialization_retries(self, *, since_ms: int | None, until_ms: int | None) -> int:
        """Sum of 40001 retries over cycle summaries whose first claim (DB time) is in range."""
        total = 0
        for record in self.cycle_summaries():
            first = _find_key(record, "first_claim_acquired_at_ms")
            if since_ms is not None and (not isinstance(first, int) or first < since_ms):
                continue
            if until_ms is not None and (not isinstance(first, int) or first >= until_ms):
                continue
            retries = _find_key(record, "serialization_retries")
            total += retries if isinstance(retries, int) else 0
        return total

    def tail(self, owner: str, lines: int = 15) -> str:
        """Return the last lines of a process's output, for error messages."""
        return "\n".join(self.log_lines(owner)[-lines:])


def ql3_replicas(
    dsn: str, owners: Sequence[str], log_dir: Path, extra_args: Sequence[str] = ()
) -> ReplicaSet:
    """`ql3 run` replicas with default settings and JSON logs, one per owner id."""
    exe = ql3_executable()
    base = [exe, "run", "--dsn", dsn, "--log-format", "json"]
    return ReplicaSet(
        commands={owner: [*base, "--owner-id", owner, *extra_args] for owner in owners},
        log_dir=log_dir,
    )


def bench_workers(
    variant: str, dsn: str, owners: Sequence[str], log_dir: Path, *, period_ms: int
) -> ReplicaSet:
    """One worker per owner id: `ql3 run` replicas (`ql3`) or bare-SQL baseline workers.

    The baseline (`python -m bench baseline-worker`, see `_baseline`) is told the crons' fixed
    period, `period_ms`, since it parses no cron.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    if variant == "ql3":
        return ql3_replicas(dsn, owners, log_dir)
    command = [sys.executable, "-m", "bench", "baseline-worker", "--dsn", dsn]
    command += ["--period-ms", str(period_ms)]
    return ReplicaSet(
        commands={owner: [*command, "--owner-id", owner] for owner in owners},
        log_dir=log_dir,
        env={"PYTHONPATH": str(_BENCH_ROOT)},
    )


def new_work_dir() -> Path:
    """Create a private temporary folder for the process logs of this run."""
    return Path(tempfile.mkdtemp(prefix="ql3-bench-"))
