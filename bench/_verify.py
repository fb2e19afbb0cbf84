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

Targets (10 M runs): <= 120 s and <= 150 MB. Sizes are parameters (`--sizes 100x100000,5x86400`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

from ._common import connect, db_now_ms, load_sql, machine_facts, repo_root

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import psycopg

    from ._common import BenchContext

__all__ = ["parse_sizes", "run_verify", "run_verify_child"]

TARGET_RUNS = 10_000_000
TARGET_S = 120.0
TARGET_RSS_MB = 150.0
DEFAULT_SIZES = "100x100000,5x86400"
QUICK_SIZES = "10x10000,5x8640"
# Rows per INSERT of the build (each statement one durable commit).
_CHUNK_ROWS = 500_000
_GAP = 10
_LATE_CLAIM_MS = 300
_END_BEFORE_NOW_MS = 120_000
# What the violated history must report, rule by rule (see the module docstring).
PLANTED = {"duplicate": 1, "early": 1, "missing": 2, "not_occurrence": 1, "shape": 1}


@dataclass(frozen=True)
class _Plan:
    """One synthetic schedule: occurrence k is `first_ms + k * step_ms`, k < occurrences."""

    index: int
    cron: str
    timezone: str
    step_ms: int
    first_ms: int
    occurrences: int
    redefined: bool

    @property
    def name(self) -> str:
        return f"verify-{self.index:06d}"

    @property
    def mid_ms(self) -> int:
        """Where the second revision (if any) starts: the cursor the admin kept."""
        return self.at(self.occurrences // 2)

    @property
    def gap_index(self) -> int | None:
        """First skipped occurrence (redefined schedules only, inside the second revision)."""
        return self.occurrences * 3 // 4 if self.redefined else None

    @property
    def claim_ms(self) -> int | None:
        """When the claim that skipped the gap was taken: just after the occurrence after it."""
        gap = self.gap_index
        return None if gap is None else self.at(gap + _GAP) + _LATE_CLAIM_MS

    @property
    def cursor_ms(self) -> int:
        return self.at(self.occurrences)

    def at(self, k: int) -> int:
        return self.first_ms + k * self.step_ms

    def committed_ms(self, k: int) -> int:
        """Commit time of occurrence k's run (`verify_build_runs.sql` writes the same)."""
        return self.at(k) + 5 + (k * 7) % 40


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


def _plans(schedules: int, occurrences: int, now_ms: int) -> list[_Plan]:
    plans = []
    for index in range(schedules):
        step = 2_000 if index % 4 == 3 else 1_000  # noqa: PLR2004 - every fourth: */2
        end = now_ms - _END_BEFORE_NOW_MS
        first = (end - occurrences * step) // step * step
        plans.append(
            _Plan(
                index=index,
                cron="*/2 * * * * *" if step == 2_000 else "* * * * * *",  # noqa: PLR2004
                timezone="UTC" if index % 2 == 0 else "Europe/Paris",
                step_ms=step,
                first_ms=first,
                occurrences=occurrences,
                redefined=index % 3 == 0,
            )
        )
    return plans


def _create_schedules(conn: psycopg.Connection[dict[str, Any]], plans: Sequence[_Plan]) -> None:
    rows = conn.execute(
        load_sql("verify_build_schedules"),
        {
            "names": [p.name for p in plans],
            "crons": [p.cron for p in plans],
            "timezones": [p.timezone for p in plans],
            "policies": ["fire_once" if p.redefined else "catch_up" for p in plans],
            "graces": [1_000 if p.redefined else 60_000 for p in plans],
            "cursors": [p.cursor_ms for p in plans],
            "created": [p.first_ms - 600 for p in plans],
            "updated": [p.committed_ms(p.occurrences - 1) for p in plans],
        },
    ).fetchall()
    ids = [(int(row["schedule_id"]), int(row["task_id"])) for row in rows]
    _write_revisions(conn, plans, [sid for sid, _ in ids])
    _write_skips(conn, plans, [sid for sid, _ in ids])
    _write_runs(conn, plans, ids)


def _write_revisions(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[_Plan], ids: Sequence[int]
) -> None:
    """Revision 1 'created' for every schedule; 'redefined' ones get a fire_once revision 2."""
    rows: list[dict[str, Any]] = []
    for plan, sid in zip(plans, ids, strict=True):
        created = plan.first_ms - 600
        first = {
            "schedule_ids": sid,
            "revisions": 1,
            "reasons": "created",
            "crons": plan.cron,
            "timezones": plan.timezone,
            "policies": "catch_up",
            "graces": 60_000,
            "first_cursors": plan.first_ms,
            "end_cursors": None,
            "placed": created - 100,
            "created": created,
            "ended": None,
        }
        rows.append(first)
        if plan.redefined:  # the admin changed the policy at mid_ms - 500, keeping the cursor
            first.update(end_cursors=plan.mid_ms, ended=plan.mid_ms - 500)
            rows.append(
                first
                | {
                    "revisions": 2,
                    "reasons": "redefined",
                    "policies": "fire_once",
                    "graces": 1_000,
                    "first_cursors": plan.mid_ms,
                    "end_cursors": None,
                    "placed": None,
                    "created": plan.mid_ms - 500,
                    "ended": None,
                }
            )
    conn.execute(
        load_sql("verify_build_revisions"), {key: [row[key] for row in rows] for key in rows[0]}
    )


def _write_skips(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[_Plan], ids: Sequence[int]
) -> None:
    gapped = [(p, sid) for p, sid in zip(plans, ids, strict=True) if p.gap_index is not None]
    conn.execute(
        load_sql("verify_build_skips"),
        {
            "schedule_ids": [sid for _, sid in gapped],
            "first_ms": [p.at(p.gap_index or 0) for p, _ in gapped],
            "last_ms": [p.at((p.gap_index or 0) + _GAP - 1) for p, _ in gapped],
            "skipped": [_GAP for _ in gapped],
            "claim_ms": [p.claim_ms for p, _ in gapped],
        },
    )


def _write_runs(
    conn: psycopg.Connection[dict[str, Any]],
    plans: Sequence[_Plan],
    ids: Sequence[tuple[int, int]],
) -> None:
    occurrences = max(p.occurrences for p in plans)
    per_chunk = max(1, _CHUNK_ROWS // len(plans))
    params: dict[str, Any] = {
        "schedule_ids": [sid for sid, _ in ids],
        "task_ids": [tid for _, tid in ids],
        "first_ms": [p.first_ms for p in plans],
        "step_ms": [p.step_ms for p in plans],
        "occurrences": [p.occurrences for p in plans],
        "gap_index": [p.gap_index for p in plans],
        "gap_count": [_GAP if p.redefined else None for p in plans],
        "claim_ms": [p.claim_ms for p in plans],
    }
    for low in range(0, occurrences, per_chunk):
        conn.execute(
            load_sql("verify_build_runs"),
            {**params, "low": low, "high": min(low + per_chunk, occurrences)},
        )


def _plant(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[_Plan], ids: Sequence[int]
) -> None:
    """Break the history in exactly the ways `PLANTED` counts, each on its own schedule."""
    conn.execute(load_sql("verify_plant_unique_dropped"))
    conn.execute(load_sql("verify_plant_plain_index"))
    third = plans[0].occurrences // 3  # before any second revision and gap
    plants = (
        ("verify_plant_missing", 0, third),
        ("verify_plant_duplicate", 1, plans[1].occurrences - 1),
        ("verify_plant_early", 2, third),
        ("verify_plant_shape", 3, third),
        ("verify_plant_off_cron", 4, third),
    )
    for name, index, k in plants:
        conn.execute(load_sql(name), {"schedule_id": ids[index], "at_ms": plans[index].at(k)})


def _schedule_ids(conn: psycopg.Connection[dict[str, Any]], plans: Sequence[_Plan]) -> list[int]:
    rows = conn.execute(
        load_sql("verify_schedule_ids"), {"names": [p.name for p in plans]}
    ).fetchall()
    return [int(row["schedule_id"]) for row in rows]


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


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    return 0


def run_verify_child(dsn: str) -> None:
    """(Child process) verify the database at `dsn` as ql3_admin; print one JSON line."""
    from ql3_cluster_postgres import verify_history  # noqa: PLC0415

    floor_kb = _status_kb("VmHWM")
    started = time.perf_counter()
    report = verify_history(dsn, stale_claim_grace_ms=0)
    elapsed = time.perf_counter() - started
    # VmHWM only: it starts afresh at exec, while ru_maxrss keeps the high-water mark of the
    # process before exec (the forked bench parent, hundreds of MB), whatever this child used.
    peak_kb = _status_kb("VmHWM")
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
            plans = _plans(schedules, occurrences, db_now_ms(conn))
            started = time.monotonic()
            _create_schedules(conn, plans)
            build_s = time.monotonic() - started
            started = time.monotonic()
            conn.execute(load_sql("verify_vacuum"))
            vacuum_s = time.monotonic() - started
            tables = conn.execute(load_sql("verify_table_sizes")).fetchone() or {}
            ids = _schedule_ids(conn, plans)
            machine = _durable_machine(conn)
        admin = database.dsn("admin")
        clean = _measure(admin)
        with connect(database.superuser_dsn) as conn:
            _plant(conn, plans, ids)
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
