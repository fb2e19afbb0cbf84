"""Benchmark 5: `ql3 verify` (verify_history) at production size.

For each size (schedules x occurrences per schedule) a durable throwaway cluster (fsync,
full_page_writes and synchronous_commit on) gets a synthetic history written with INSERT ...
SELECT generate_series as the superuser (`sql/verify_build_*.sql`): per-second and every-2-second
crons in UTC and Europe/Paris, 1 run : 1 attempt : 2 events per occurrence at the run's commit
time, runs interleaved across schedules in occurrence order as a live history is, and on every
third schedule a second revision (policy changed to fire_once, the cursor kept) with a gap of ten
occurrences held by a skip record. The history ends two minutes before the database's now. It is
VACUUMed (what autovacuum does to a settled table), then checked twice by `verify_history` in a
child process, each time reporting its duration (`time.perf_counter()` around the call) and peak
resident set (`VmHWM` from /proc, with the floor after imports for comparison):

- clean: every rule must pass;
- violated: one occurrence lost (`missing`), one admitted twice with the UNIQUE constraint dropped
  (`duplicate`), one committed before its occurrence (`early`), one event lost (`shape`), one run
  moved off the cron (`not_occurrence`, plus the `missing` occurrence it left): the report must
  hold exactly these.

Targets (10 M runs, `_targets`): <= 60 s and <= 100 MB. Sizes are parameters
(`--sizes 100x100000,5x86400`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

from ._common import db_now_ms, repo_root
from ._meters import machine_facts, memory_kb
from ._sql import connect, load_sql
from ._targets import VERIFY_RSS_MB, VERIFY_RUNS, VERIFY_S
from ._verify_history import PLANTED, create_schedules, plan_history, plant, schedule_ids

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import psycopg

    from ._common import BenchContext

__all__ = ["parse_sizes", "run_verify", "run_verify_child"]

TARGET_RUNS = VERIFY_RUNS
TARGET_S = VERIFY_S
TARGET_RSS_MB = VERIFY_RSS_MB
DEFAULT_SIZES = "100x100000,5x86400"
QUICK_SIZES = "10x10000,5x8640"


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """Parse `100x100000,5x86400` into (schedules, occurrences per schedule) pairs."""
    sizes = []
    for item in text.split(","):
        schedules, _, occurrences = item.strip().partition("x")
        pair = (int(schedules), int(occurrences))
        if pair[0] < 5 or pair[1] < 100:  # noqa: PLR2004 - the plants need 5 schedules, a gap
            msg = f"--sizes: {item!r} needs at least 5 schedules x 100 occurrences"
            raise SystemExit(msg)
        sizes.append(pair)
    return sizes


def _measure(dsn: str) -> dict[str, Any]:
    """Run verify_history in a child process; return what it printed (one JSON object)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bench", "verify-child", "--dsn", dsn],
        cwd=repo_root(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        msg = f"verify child failed ({done.returncode}):\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = round(time.monotonic() - started, 2)
    return result


def run_verify_child(dsn: str) -> None:
    """(Child process) verify the database at `dsn` as ql3_admin; print one JSON line."""
    from ql3_cluster_postgres import verify_history  # noqa: PLC0415

    floor_kb = memory_kb().get("VmHWM", 0)
    started = time.perf_counter()
    report = verify_history(dsn, stale_claim_grace_ms=0)
    elapsed = time.perf_counter() - started
    # VmHWM only: it starts afresh at exec, while ru_maxrss keeps the high-water mark of the
    # process before exec (the forked bench parent, hundreds of MB), whatever this child used.
    peak_kb = memory_kb().get("VmHWM", 0)
    counts = dict(sorted(report.violation_counts.items()))
    line = {
        "verify_s": round(elapsed, 2),
        "rss_peak_mb": round(peak_kb / 1024, 1),
        "rss_floor_mb": round(floor_kb / 1024, 1),
        "ok": report.ok,
        "schedules": report.schedules,
        "runs": report.runs,
        "expected": report.expected,
        "skipped": report.skipped,
        "missing": report.missing,
        "violations": counts,
        "violations_total": len(report.violations),
        "lines": report.lines()[:12],
    }
    print(json.dumps(line), flush=True)


@contextlib.contextmanager
def _durable_cluster() -> Iterator[ThrowawayCluster]:
    cluster = ThrowawayCluster(durable=True, name="ql3verify")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _one_size(
    ctx: BenchContext, cluster: ThrowawayCluster, size: tuple[int, int]
) -> dict[str, Any]:
    schedules, occurrences = size
    database = prepare_ql3_database(cluster, f"verify_{schedules}x{occurrences}")
    try:
        with connect(database.superuser_dsn) as conn:
            plans = plan_history(schedules, occurrences, db_now_ms(conn))
            started = time.monotonic()
            create_schedules(conn, plans)
            build_s = time.monotonic() - started
            started = time.monotonic()
            conn.execute(load_sql("verify_vacuum"))
            vacuum_s = time.monotonic() - started
            tables = conn.execute(load_sql("verify_table_sizes")).fetchone() or {}
            ids = schedule_ids(conn, plans)
            machine = _durable_machine(conn)
        admin = database.dsn("admin")
        clean = _measure(admin)
        with connect(database.superuser_dsn) as conn:
            plant(conn, plans, ids)
        violated = _measure(admin)
        timings = {"build_s": round(build_s, 1), "vacuum_s": round(vacuum_s, 1)}
        record = _record(size, tables, timings, clean, violated)
        # The figures come from the durable cluster: say so in the machine facts of this line.
        previous, ctx.machine = ctx.machine, machine
        try:
            return ctx.emit("verify", record)
        finally:
            ctx.machine = previous
    finally:
        drop_database(cluster, database.name)


def _durable_machine(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, Any]:
    facts = machine_facts(conn)
    settings = facts["pg_settings"]
    durable = all(settings.get(name) == "on" for name in ("fsync", "full_page_writes"))
    return {**facts, "durable": durable and settings.get("synchronous_commit") != "off"}


def _record(  # one size's figures
    size: tuple[int, int],
    tables: dict[str, Any],
    timings: dict[str, float],
    clean: dict[str, Any],
    violated: dict[str, Any],
) -> dict[str, Any]:
    runs = int(tables.get("runs", 0))
    at_target = runs >= TARGET_RUNS
    worst_s = max(clean["verify_s"], violated["verify_s"])
    worst_mb = max(clean["rss_peak_mb"], violated["rss_peak_mb"])
    return {
        "schedules": size[0],
        "occurrences_per_schedule": size[1],
        "runs": runs,
        "attempts": int(tables.get("attempts", 0)),
        "events": int(tables.get("events", 0)),
        "skip_records": int(tables.get("skip_records", 0)),
        "revisions": int(tables.get("revisions", 0)),
        "history_mb": round(int(tables.get("history_bytes", 0)) / 2**20),
        **timings,
        "clean": clean,
        "violated": violated,
        "planted": PLANTED,
        "target_s": TARGET_S,
        "target_rss_mb": TARGET_RSS_MB,
        "met": {
            "clean_ok": clean["ok"] is True,
            "violations_exact": violated["violations"] == PLANTED,
            "time": worst_s <= TARGET_S if at_target else None,
            "rss": worst_mb <= TARGET_RSS_MB if at_target else None,
        },
    }


def run_verify(
    ctx: BenchContext, sizes: Sequence[tuple[int, int]] | None = None
) -> list[dict[str, Any]]:
    """Build, check clean and check violated, for each size, on one durable cluster."""
    records: list[dict[str, Any]] = []
    chosen = sizes or parse_sizes(QUICK_SIZES if ctx.quick else DEFAULT_SIZES)
    with _durable_cluster() as cluster:
        for size in chosen:
            print(f"# verify {size[0]}x{size[1]}", file=sys.stderr, flush=True)
            records.append(_one_size(ctx, cluster, size))
    return records
