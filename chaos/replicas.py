"""The `ql3` processes a scenario starts, and what chaos reads of them.

`LoggedProcess` is what chaos knows of any `ql3` process (alive, killed, stopped, its JSON log);
`Replica` is one `ql3 run` with JSON logs in a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from bounds import POLL_INTERVAL_MS
from probes import ql3_executable, wait_until

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


class LoggedProcess:
    """What chaos knows of a `ql3` process it started: alive, killed, stopped, its JSON log.

    A mixin for the dataclasses that start one (`Replica`, `workers.WorkerProcess`), which
    declare `process`, `exit_code` and `log_path` as fields.
    """

    process: subprocess.Popen[bytes] | None
    exit_code: int | None
    log_path: Path
    # How long a graceful stop may take before the process is killed.
    stop_timeout_s: ClassVar[float] = 20

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> int:
        """SIGKILL the process and return its exit status (-9 proves the kill took effect)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.exit_code = self.process.wait(10)
        return self.exit_code

    def stop(self, timeout_s: float | None = None) -> int:
        """SIGTERM (a graceful stop) and return the exit code; killed after the timeout."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.process.wait(timeout_s or self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.exit_code = self.process.wait(10)
        else:
            self.exit_code = self.process.returncode
        return self.exit_code

    def records(self) -> list[dict[str, Any]]:
        """Parse the JSON log lines written so far (other lines are ignored)."""
        records: list[dict[str, Any]] = []
        if not self.log_path.exists():
            return records
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def events(self, name: str) -> list[dict[str, Any]]:
        """Log records of one `event` kind (e.g. cycle.summary, attempt.finished)."""
        return [record for record in self.records() if record.get("event") == name]


@dataclass
class Replica(LoggedProcess):
    """One `ql3 run` process with JSON logs in a file."""

    owner_id: str
    dsn: str
    log_path: Path
    lease_ms: int
    poll_interval_ms: int = POLL_INTERVAL_MS
    claim_batch: int = 16
    env_extra: dict[str, str] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None

    def start(self) -> Replica:
        """Start the process (the DSN travels in QL3_DSN, not on the command line)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
        env.update(self.env_extra)
        env["QL3_DSN"] = self.dsn
        # Its sessions are findable in pg_stat_activity (e.g. "are a killed replica's gone?").
        env["QL3_APPLICATION_NAME"] = self.owner_id[:63]
        argv = [
            *self.prefix,
            str(ql3_executable()),
            "run",
            "--owner-id",
            self.owner_id,
            "--lease-ms",
            str(self.lease_ms),
            "--poll-interval-ms",
            str(self.poll_interval_ms),
            "--claim-batch",
            str(self.claim_batch),
            "--log-format",
            "json",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def serialization_retries(self) -> int:
        """Sum of the 40001 retries reported in this replica's cycle summaries."""
        return sum(int(r.get("serialization_retries", 0)) for r in self.events("cycle.summary"))

    def admitted(self) -> int:
        """Sum of the admissions reported in this replica's cycle summaries."""
        return sum(int(r.get("admitted", 0)) for r in self.events("cycle.summary"))

    def wait_ready(self, timeout_s: float = 30) -> None:
        """Wait until the replica has connected and checked the schema (its log says so)."""
        try:
            wait_until(
                lambda: bool(self.events("service.connected")),
                timeout_s=timeout_s,
                what=f"replica {self.owner_id} is connected",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.tail()}") from None

    def tail(self, lines: int = 15) -> str:
        """Return the end of the log, for failure messages."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def sum_events(replicas: Sequence[Replica], name: str) -> int:
    """How many log records of kind `name` all the replicas wrote."""
    return sum(len(r.events(name)) for r in replicas)
