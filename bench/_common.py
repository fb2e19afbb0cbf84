"""What every benchmark shares: the throwaway cluster, the database clock, the run, its JSON lines.

Rule zero holds here too: `time.monotonic()`/`time.perf_counter()` only measure or pace; every
time value that is reported or compared (admission times, windows, lateness) is read from the
database with `clock_timestamp()`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import PrivateServerError, ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition
from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

from ._baseline import BATCH, BUDGET
from ._meters import STATEMENT_STATS, machine_facts
from ._sql import load_sql

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    import psycopg
    from ql3_testkit import Ql3Database

__all__ = [
    "BASELINE_LABEL",
    "CLUSTER_SETTINGS",
    "DEFAULTS_LABEL",
    "BenchContext",
    "db_now_ms",
    "repo_root",
    "start_cluster",
    "wait_until",
]


# What every QL3 replica of the benchmarks runs with: the product defaults, read from its settings.
DEFAULTS_LABEL = f"defaults (batch {BATCH}, budget {BUDGET}, lease 30 s)"
BASELINE_LABEL = f"bare SQL: claim {BATCH}, budget {BUDGET}, one SERIALIZABLE statement per round"

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


def db_now_ms(conn: psycopg.Connection[dict[str, Any]]) -> int:
    """Read the database clock in epoch milliseconds: the only 'now' the benchmarks know."""
    row = conn.execute(load_sql("db_now")).fetchone()
    assert row is not None  # noqa: S101 - a SELECT without FROM always returns one row
    return int(row["now_ms"])


def wait_until(predicate: Callable[[], bool], *, timeout_s: float, interval_s: float = 0.2) -> bool:
    """Poll `predicate` until it holds or the monotonic deadline passes; True if it held."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def repo_root() -> Path:
    """Return the folder holding the `bench` package (for `python -m bench` sub-processes)."""
    return Path(str(resources.files("bench"))).parent


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
        STATEMENT_STATS.clear()
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
