"""What the benchmarks measure besides the database's own times: CPU, waits, WAL, statements.

CPU comes from /proc (each process's and the machine's ticks), wait events and statement
statistics from the server's views (`pg_stat_activity`, `pg_stat_statements` when the server has
it), WAL and flushes from `pg_stat_wal`, and the machine and durability facts every JSON line
carries from the server's settings. Rule zero: `time.monotonic()` only paces the samplers.
"""

from __future__ import annotations

import collections
import contextlib
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg.conninfo import conninfo_to_dict

from ._sql import connect, load_sql

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg
    from ql3_testkit import ThrowawayCluster

__all__ = [
    "STATEMENT_STATS",
    "CpuMeter",
    "WaitSampler",
    "WalMeter",
    "claim_statement_stats",
    "cpu_seconds",
    "disk_flush_rate",
    "login_user",
    "machine_facts",
    "machine_ticks",
    "reset_statement_stats",
    "statement_stats",
]

# Emptied when the server has no pg_stat_statements: the diagnostics are then skipped.
STATEMENT_STATS: list[bool] = [True]


# Settings read back from the server into every JSON line: the durability a figure was measured
# under is a fact of the run, not a claim of the report.
_REPORTED_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
    "wal_level",
    "wal_buffers",
    "wal_writer_delay",
    "commit_delay",
    "max_wal_size",
    "shared_buffers",
)
_DURABLE_SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}


def cpu_seconds(pids: Sequence[int]) -> float:
    """Sum the user + system CPU time of processes (from /proc; a vanished pid counts 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)
    return total


def memory_kb(pid: int | str = "self") -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS of a process, in kB, from /proc."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in {"VmHWM", "VmRSS"}:
            found[key] = int(value.split()[0])
    return found


def machine_ticks() -> tuple[int, int]:
    """Return (busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    fields = [
        int(v) for v in Path("/proc/stat").read_text(encoding="ascii").split("\n")[0].split()[1:]
    ]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
    return total - idle, total


@dataclass
class CpuMeter:
    """CPU seconds spent by worker processes and by their PostgreSQL backends over a span.

    Backends are found by the workers' login user in `pg_stat_activity` (same machine). Dividing
    by the admissions of the span gives the CPU cost of one admission on each side.
    """

    su: psycopg.Connection[dict[str, Any]]
    user: str
    worker_pids: Sequence[int]
    _start: tuple[float, float] = (0.0, 0.0)
    _machine: tuple[int, int] = (0, 0)
    _backends: list[int] = field(default_factory=list)

    def backend_pids(self) -> list[int]:
        """Return the pids of the backends serving the workers' login user now."""
        rows = self.su.execute(load_sql("backend_pids"), {"user": self.user}).fetchall()
        return [int(row["pid"]) for row in rows]

    def start(self) -> None:
        """Take the first reading."""
        self._backends = self.backend_pids()
        self._start = (cpu_seconds(self.worker_pids), cpu_seconds(self._backends))
        self._machine = machine_ticks()

    def stop(self, admissions: int) -> dict[str, float | None]:
        """Take the second reading; CPU ms per admission on the worker and database sides."""
        workers = cpu_seconds(self.worker_pids) - self._start[0]
        backends = cpu_seconds(self._backends) - self._start[1]
        busy, total = (now - then for now, then in zip(machine_ticks(), self._machine, strict=True))
        cores = os.cpu_count() or 1
        # Span length in CPU-seconds of one core, from the machine's own tick counters.
        span_s = total / os.sysconf("SC_CLK_TCK") / cores if total else 0.0
        machine_busy = busy / total * cores if total else 0.0
        ours = (workers + backends) / span_s if span_s else 0.0

        def per(seconds: float) -> float | None:
            return round(seconds * 1000 / admissions, 4) if admissions else None

        return {
            "worker_cpu_s": round(workers, 3),
            "backend_cpu_s": round(backends, 3),
            "worker_cpu_ms_per_admission": per(workers),
            "backend_cpu_ms_per_admission": per(backends),
            "cores_busy_ours": round(ours, 2),
            "cores_busy_others": round(max(machine_busy - ours, 0.0), 2),
        }


def login_user(dsn: str) -> str:
    """Return the login user named in a conninfo string."""
    return str(conninfo_to_dict(dsn).get("user"))


def reset_statement_stats(su: psycopg.Connection[dict[str, Any]]) -> None:
    """Install pg_stat_statements in this database if needed and zero its counters."""
    if STATEMENT_STATS:
        su.execute(load_sql("statement_stats_install"))
        su.execute(load_sql("statement_stats_reset"))


def statement_stats(su: psycopg.Connection[dict[str, Any]], limit: int = 4) -> list[dict[str, Any]]:
    """Return the statements of this database with the most server time since the reset."""
    if not STATEMENT_STATS:
        return []
    return [dict(row) for row in su.execute(load_sql("statement_stats"), {"limit": limit})]


def claim_statement_stats(su: psycopg.Connection[dict[str, Any]]) -> dict[str, Any]:
    """Return the claim statement's server-side cost since the reset (empty without stats)."""
    if not STATEMENT_STATS:
        return {}
    return dict(su.execute(load_sql("claim_statement_stats")).fetchone() or {})


class WaitSampler:
    """Sample what the workers' backends wait on (pg_stat_activity) from a background thread.

    Counts `wait_event_type:wait_event` (or `CPU`) over active backends every `interval_s`.
    """

    def __init__(self, dsn: str, user: str, interval_s: float = 0.05) -> None:
        self._dsn, self._user, self._interval_s = dsn, user, interval_s
        self._counts: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)
        self.samples = 0

    def _run(self) -> None:
        with connect(self._dsn) as conn:
            query, params = load_sql("wait_events"), {"user": self._user}
            while not self._stop.wait(self._interval_s):
                self.samples += 1
                self._counts.update(row["what"] for row in conn.execute(query, params))

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self, top: int = 6) -> dict[str, float]:
        """Stop; return the most frequent states as the mean number of backends in each."""
        self._stop.set()
        self._thread.join()
        samples = max(self.samples, 1)
        return {what: round(n / samples, 3) for what, n in self._counts.most_common(top)}


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_facts(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, Any]:
    """Cores, CPU, Python and the PostgreSQL version and durability settings (from the DB)."""
    row = conn.execute(load_sql("server_version")).fetchone()
    assert row is not None  # noqa: S101 - the statement returns one row
    settings = {
        name: conn.execute(load_sql("show_setting"), {"name": name}).fetchone()
        for name in _REPORTED_SETTINGS
    }
    values = {name: (value or {}).get("value") for name, value in settings.items()}
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "postgresql": row["version"],
        "durable": all(values.get(k) == v for k, v in _DURABLE_SETTINGS.items()),
        "pg_settings": values,
    }


def disk_flush_rate(cluster: ThrowawayCluster, seconds: int = 2) -> dict[str, Any]:
    """Measure the disk's flush rate beside the data dir with `pg_test_fsync`.

    Every durable commit waits for at least one WAL flush (`wal_sync_method`, fdatasync on
    Linux) unless group commit shares it: the fdatasync rate is the physical limit of commits
    per second for one writer. Both of pg_test_fsync's fdatasync lines (one and two 8 kB
    writes) are kept; the higher one is the limit the figures are compared with.
    """
    target = cluster.base_dir / "pg_test_fsync.out"
    text = cluster.run_tool("pg_test_fsync", "-s", str(seconds), "-f", str(target))
    readings = [
        float(line.split()[1])
        for line in text.splitlines()
        if line.strip().startswith("fdatasync") and "ops/sec" in line
    ]
    best = max(readings) if readings else None
    return {
        "tool": f"pg_test_fsync -s {seconds} (file beside the data dir)",
        "fdatasync_ops_per_s": [round(r) for r in readings],
        "flushes_per_s": round(best) if best else None,
        "flush_us": round(1e6 / best) if best else None,
    }


class WalMeter:
    """WAL flushes, WAL bytes and commits of the whole cluster over a span (pg_stat_wal).

    The harness is the cluster's only other user and idles during a window, so the deltas are
    the workers': flushes per admission and flushes per second (against the disk's flush rate)
    say how close a figure is to the physical limit.
    """

    def __init__(self, su: psycopg.Connection[dict[str, Any]]) -> None:
        self._su = su
        self._start: dict[str, Any] = {}
        self._t0 = 0.0

    def _read(self) -> dict[str, Any]:
        return dict(self._su.execute(load_sql("wal_stats")).fetchone() or {})

    def start(self) -> None:
        """Take the first reading."""
        self._start = self._read()
        self._t0 = time.monotonic()

    def stop(self, admissions: int, flush_limit_per_s: float | None) -> dict[str, Any]:
        """Return the deltas, per second and per admission, and the share of the flush limit."""
        end = self._read()
        span_s = max(time.monotonic() - self._t0, 1e-6)
        delta = {k: int(end[k]) - int(self._start.get(k, 0)) for k in end}
        syncs_per_s = delta["wal_sync"] / span_s
        return {
            "wal_syncs": delta["wal_sync"],
            "wal_syncs_per_s": round(syncs_per_s, 1),
            "wal_syncs_per_admission": round(delta["wal_sync"] / admissions, 4)
            if admissions
            else None,
            "commits": delta["xact_commit"],
            "wal_kb_per_admission": round(delta["wal_bytes"] / 1024 / admissions, 3)
            if admissions
            else None,
            "flush_limit_share": round(syncs_per_s / flush_limit_per_s, 3)
            if flush_limit_per_s
            else None,
        }
