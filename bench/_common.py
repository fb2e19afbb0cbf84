"""What every benchmark shares: SQL files, the throwaway cluster, replica processes, JSON lines.

Rule zero holds here too: `time.monotonic()`/`time.perf_counter()` only measure or pace; every
time value that is reported or compared (admission times, windows, lateness) is read from the
database with `clock_timestamp()`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from psycopg.conninfo import conninfo_to_dict
from ql3_cluster_postgres import PrivateServerError, ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition
from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

from ._baseline import BATCH, BUDGET
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    import psycopg
    from ql3_testkit import Ql3Database

__all__ = [
    "DEFAULTS_LABEL",
    "BenchContext",
    "CpuMeter",
    "ReplicaSet",
    "WaitSampler",
    "WalMeter",
    "claim_statement_stats",
    "connect",
    "cpu_seconds",
    "db_now_ms",
    "disk_flush_rate",
    "load_sql",
    "login_user",
    "machine_facts",
    "new_work_dir",
    "ql3_executable",
    "ql3_replicas",
    "repo_root",
    "reset_statement_stats",
    "start_cluster",
    "statement_stats",
    "wait_until",
]

# What every QL3 replica of the benchmarks runs with: the product defaults, read from its settings.
DEFAULTS_LABEL = f"defaults (batch {BATCH}, budget {BUDGET}, lease 30 s)"

# Settings for the benchmark cluster on top of ThrowawayCluster(durable=True) (fsync,
# full_page_writes and synchronous_commit on, PostgreSQL's default WAL settings; DESIGN §14):
# enough connections for 4 replicas and the harness, PostgreSQL's default shared_buffers (128MB,
# so wal_buffers is its stock 4MB; the testkit's base is 32MB), and pg_stat_statements so each
# cell can say which statement its server time went to.
_PLAIN_SETTINGS: Mapping[str, str] = {"max_connections": "60", "shared_buffers": "128MB"}
CLUSTER_SETTINGS: Mapping[str, str] = {
    **_PLAIN_SETTINGS,
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
}
# Emptied when the server has no pg_stat_statements: the diagnostics are then skipped.
_STATEMENT_STATS: list[bool] = [True]


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


def db_now_ms(conn: psycopg.Connection[dict[str, Any]]) -> int:
    """Read the database clock in epoch milliseconds: the only 'now' the benchmarks know."""
    row = conn.execute(load_sql("db_now")).fetchone()
    assert row is not None  # noqa: S101 - a SELECT without FROM always returns one row
    return int(row["now_ms"])


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
    if _STATEMENT_STATS:
        su.execute(load_sql("statement_stats_install"))
        su.execute(load_sql("statement_stats_reset"))


def statement_stats(su: psycopg.Connection[dict[str, Any]], limit: int = 4) -> list[dict[str, Any]]:
    """Return the statements of this database with the most server time since the reset."""
    if not _STATEMENT_STATS:
        return []
    return [dict(row) for row in su.execute(load_sql("statement_stats"), {"limit": limit})]


def claim_statement_stats(su: psycopg.Connection[dict[str, Any]]) -> dict[str, Any]:
    """Return the claim statement's server-side cost since the reset (empty without stats)."""
    if not _STATEMENT_STATS:
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


def wait_until(predicate: Callable[[], bool], *, timeout_s: float, interval_s: float = 0.2) -> bool:
    """Poll `predicate` until it holds or the monotonic deadline passes; True if it held."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


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


def repo_root() -> Path:
    """Return the folder holding the `bench` package (for `python -m bench` sub-processes)."""
    return Path(str(resources.files("bench"))).parent


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


@contextlib.contextmanager
def start_cluster(*, durable: bool = True) -> Iterator[ThrowawayCluster]:
    """Start a throwaway PostgreSQL for one benchmark run (durable by default); tear it down."""
    cluster = ThrowawayCluster(durable=durable, settings=CLUSTER_SETTINGS, name="ql3bench")
    try:
        cluster.start()
    except PrivateServerError as exc:
        # A server build without pg_stat_statements (e.g. a bundled one): measure without the
        # per-statement diagnostics rather than not at all.
        print(f"# pg_stat_statements unavailable, diagnostics off: {exc}", file=sys.stderr)
        cluster.stop()
        _STATEMENT_STATS.clear()
        cluster = ThrowawayCluster(durable=durable, settings=_PLAIN_SETTINGS, name="ql3bench")
        cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass
class BenchContext:
    """One benchmark run: its cluster, options, the JSON-lines sink and the machine facts."""

    cluster: ThrowawayCluster
    quick: bool
    jsonl: Path | None
    work_dir: Path
    machine: dict[str, Any] = field(default_factory=dict)
    disk: dict[str, Any] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    _databases: int = 0
    _shared: dict[str, Ql3Database] = field(default_factory=dict)

    def database(self, prefix: str, *, template: str | None = None) -> Ql3Database:
        """Create a fresh QL3 database (roles, migrations), optionally cloned from `template`."""
        self._databases += 1
        return prepare_ql3_database(self.cluster, f"{prefix}_{self._databases}", template=template)

    def drop(self, database: Ql3Database) -> None:
        """Drop a finished measurement's database so the cluster stays small."""
        drop_database(self.cluster, database.name)

    def schedules_database(
        self,
        prefix: str,
        crons: Sequence[str],
        *,
        policy: MisfirePolicy = MisfirePolicy.CATCH_UP,
    ) -> Ql3Database:
        """Create a database holding one schedule per cron expression, through ScheduleAdmin.

        Used as a template: each measurement clones it (`CREATE DATABASE ... TEMPLATE`), which
        takes a fraction of a second whatever the number of schedules.
        """
        database = self.database(prefix)
        specs = [
            ScheduleSpec(
                name=f"{prefix}-{index:06d}",
                definition=ScheduleDefinition(cron=cron, misfire_policy=policy),
            )
            for index, cron in enumerate(crons)
        ]
        with ScheduleAdmin(database.dsn("admin")) as admin:
            admin.apply_schedules(specs)
        return database

    def shared_schedules(self, prefix: str, cron: str, count: int) -> Ql3Database:
        """Return a template of `count` schedules `cron`, built once per run and kept.

        100 000 schedules take minutes to apply through ScheduleAdmin; the burst and the
        footprint both clone the same template.
        """
        key = f"{prefix}:{cron}:{count}"
        if key not in self._shared:
            self._shared[key] = self.schedules_database(prefix, [cron] * count)
        return self._shared[key]

    def emit(self, measurement: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """Print one JSON line for a measurement (with machine facts) and keep it for the report."""
        line = {"measurement": measurement, **record, "machine": self.machine}
        self.results.append(line)
        text = json.dumps(line, sort_keys=False)
        print(text, flush=True)
        if self.jsonl is not None:
            with self.jsonl.open("a", encoding="utf-8") as sink:
                sink.write(text + "\n")
        return line

    def refresh_machine(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        """Re-read machine facts (load average changes between measurements)."""
        self.machine = machine_facts(conn)


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


def new_work_dir() -> Path:
    """Create a private temporary folder for the process logs of this run."""
    return Path(tempfile.mkdtemp(prefix="ql3-bench-"))
