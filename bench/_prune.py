"""Benchmark 6: history retention (`ql3 history prune`) at size, and hour after hour.

Scale. On a durable throwaway cluster (fsync, full_page_writes, synchronous_commit on), the verify
benchmark's synthetic history (`_verify_history`: per-second and every-2-second crons in UTC and
Europe/Paris, 1 run : 1 attempt : 2 events, a second revision and a skip record on every third
schedule) is written as the superuser, its attempts ended `succeeded` (a queued attempt is live
and never pruned) and its tasks given one short attempt (so the refusal bound is minutes). It is
VACUUMed and verified (child process, as in the verify benchmark), then pruned with
`prune_history` as ql3_admin (10 000 Runs a batch) to the newest tenth of the per-second
schedules' span (the every-2-second schedules span twice the time, so they keep a twentieth of
their Runs: 1 M Runs keep about 90 k), VACUUMed and verified again. Measured: the prune's wall
time, its WAL volume (`pg_current_wal_lsn` before and after), verify's time before and after, the
rows and bytes left, and that both verdicts are clean. `--older-than` is a duration, so every
batch takes its cutoff from the database clock of its own transaction: during a prune of P
seconds the cutoff moves P seconds and each schedule loses up to P / step more Runs than at the
first batch; `kept_as_expected` allows exactly that.

Hourly. On a cluster under libfaketime (the database clock moved an hour per simulated hour: the
method is a faked DATABASE clock, never a node's), every simulated hour appends an hour of
per-second history for each schedule (`verify_build_runs.sql`, attempts settled), moves the
cursors, prunes `--older-than 2h` and VACUUMs (what autovacuum does). The database size per hour
must level off once the retention is full: `flat` says the largest size of the second half of
the hours is within 15 % of the largest of the first half (the plateau does not rise); `plateau`
compares the largest size of the second half with the size when the retention filled (hour 3).
With `autovacuum=True` the run never VACUUMs: autovacuum (default thresholds, the launcher's
naptime lowered to 1 s because an hour passes in seconds) must do it; after each prune the run
waits (up to `AUTOVACUUM_WAIT_S`) until autovacuum has vacuumed the Runs, attempts and events
tables once more, and records whether it did. The database clock is the real clock plus the
offset, so each simulated hour also lasts the seconds the loop took: the cutoff advances by them
too and the Runs kept shrink by that many per schedule and hour.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import TYPE_CHECKING, Any, Final

from ql3_cluster_postgres import prune_history, verify_history
from ql3_testkit import ThrowawayCluster, drop_database, prepare_ql3_database

from ._common import db_now_ms
from ._sql import connect, load_sql
from ._verify import _measure
from ._verify_history import Plan, _write_runs, create_schedules, plan_history, schedule_ids

if TYPE_CHECKING:
    from collections.abc import Iterator

    import psycopg

    from ._common import BenchContext

__all__ = ["run_prune"]

HOUR: Final = 3_600_000
BATCH: Final = 10_000
# Scale: 10 schedules x 100 000 occurrences = 1 M Runs pruned to 90 k (quick: 5 x 10 000).
SCALE: Final = ((10, 100_000),)
QUICK_SCALE: Final = ((5, 10_000),)
# Hourly: schedules appended every hour, hours simulated, retention.
HOURLY: Final = (5, 24)
QUICK_HOURLY: Final = (2, 5)
RETAIN_MS: Final = 2 * HOUR
FLAT_TOLERANCE: Final = 0.15
AUTOVACUUM_WAIT_S: Final = 60.0


@contextlib.contextmanager
def _cluster(*, faketime: bool) -> Iterator[ThrowawayCluster]:
    cluster = ThrowawayCluster(durable=not faketime, faketime=faketime, name="ql3prune")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _lsn(conn: psycopg.Connection[dict[str, Any]]) -> str:
    row = conn.execute(load_sql("prune_wal_lsn")).fetchone() or {}
    return str(row["lsn"])


def _wal_bytes(conn: psycopg.Connection[dict[str, Any]], before: str) -> int:
    row = conn.execute(load_sql("prune_wal_bytes"), {"before": before, "after": _lsn(conn)})
    return int((row.fetchone() or {})["wal_bytes"])


def _sizes(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, int]:
    row = conn.execute(load_sql("prune_sizes")).fetchone() or {}
    return {key: int(value) for key, value in row.items()}


def _kept(plans: list[Plan], cutoff_ms: int) -> int:
    """Count the Runs at or after `cutoff_ms` (the built gaps lie at three quarters, below it)."""
    return sum(p.occurrences - max(0, -(-(cutoff_ms - p.first_ms) // p.step_ms)) for p in plans)


def _scale(
    ctx: BenchContext, cluster: ThrowawayCluster, schedules: int, occurrences: int
) -> dict[str, Any]:
    database = prepare_ql3_database(cluster, f"prune_{schedules}x{occurrences}")
    try:
        with connect(database.superuser_dsn) as conn:
            now_ms = db_now_ms(conn)
            plans = plan_history(schedules, occurrences, now_ms)
            started = time.monotonic()
            create_schedules(conn, plans)
            conn.execute(load_sql("prune_settle_attempts"))
            conn.execute(load_sql("prune_short_tasks"))
            build_s = time.monotonic() - started
            conn.execute(load_sql("prune_vacuum"))
            before = _sizes(conn)
        admin = database.dsn("admin")
        verify_before = _measure(admin)
        with connect(database.superuser_dsn) as conn:
            # Keep the newest tenth of the SHORTEST span (the per-second schedules'): the longest
            # (every-2-second) span's tenth would keep two tenths of every per-second schedule.
            keep_ms = min(p.cursor_ms - p.first_ms for p in plans) // 10
            cutoff_ms = max(p.cursor_ms for p in plans) - keep_ms
            older_than_ms = db_now_ms(conn) - cutoff_ms
            lsn = _lsn(conn)
            started = time.monotonic()
            report = prune_history(admin, older_than_ms=older_than_ms, batch=BATCH)
            prune_s = time.monotonic() - started
            wal = _wal_bytes(conn, lsn)
            started = time.monotonic()
            conn.execute(load_sql("prune_vacuum"))
            vacuum_s = time.monotonic() - started
            after = _sizes(conn)
        verify_after = _measure(admin)
    finally:
        drop_database(cluster, database.name)
    expected = _kept(plans, cutoff_ms)
    drift = sum(math.ceil(prune_s * 1000 / p.step_ms) for p in plans)
    return ctx.emit(
        "prune",
        {
            "schedules": schedules,
            "occurrences_per_schedule": occurrences,
            "runs_before": before["runs"],
            "runs_after": after["runs"],
            "runs_expected_after": expected,
            "cutoff_drift_runs_max": drift,
            "runs_removed": report.runs,
            "batches": report.batches,
            "checkpoints": after["checkpoints"],
            "build_s": round(build_s, 1),
            "prune_s": round(prune_s, 1),
            "runs_removed_per_s": round(report.runs / prune_s) if prune_s else None,
            "wal_mb": round(wal / 2**20, 1),
            "wal_bytes_per_run_removed": round(wal / report.runs) if report.runs else None,
            "vacuum_s": round(vacuum_s, 1),
            "history_mb_before": round(before["history_bytes"] / 2**20),
            "history_mb_after": round(after["history_bytes"] / 2**20),
            "database_mb_after": round(after["database_bytes"] / 2**20),
            "checkpoint_kb": round(after["checkpoint_bytes"] / 1024),
            "verify_before": verify_before,
            "verify_after": verify_after,
            "met": {
                "clean_before": verify_before["ok"],
                "clean_after": verify_after["ok"],
                "kept_as_expected": expected - drift <= after["runs"] <= expected,
            },
        },
    )


def _hour_plans(count: int, first_ms: int) -> list[Plan]:
    return [
        Plan(
            index=index,
            cron="* * * * * *",
            timezone="UTC",
            step_ms=1_000,
            first_ms=first_ms,
            occurrences=HOUR // 1_000,
            redefined=False,
        )
        for index in range(count)
    ]


def _vacuums(conn: psycopg.Connection[dict[str, Any]]) -> int:
    return int((conn.execute(load_sql("prune_autovacuum_count")).fetchone() or {})["vacuums"])


def _await_autovacuum(conn: psycopg.Connection[dict[str, Any]], before: int) -> bool:
    """Wait until autovacuum vacuumed every history table once more than `before` times."""
    deadline = time.monotonic() + AUTOVACUUM_WAIT_S
    while time.monotonic() < deadline:
        if _vacuums(conn) > before:
            return True
        time.sleep(0.25)
    return False


def _hourly(
    ctx: BenchContext, cluster: ThrowawayCluster, hours: int | None, *, autovacuum: bool
) -> dict[str, Any]:
    schedules, default_hours = QUICK_HOURLY if ctx.quick else HOURLY
    hours = hours or default_hours
    cluster.set_clock_offset_ms(0)
    database = prepare_ql3_database(cluster, "prune_hourly")
    if autovacuum:
        with connect(cluster.dsn()) as conn:
            conn.execute(load_sql("prune_autovacuum_naptime"))
            conn.execute(load_sql("prune_reload_conf"))
    admin = database.dsn("admin")
    rows: list[dict[str, Any]] = []
    try:
        with connect(database.superuser_dsn) as conn:
            # The first simulated hour ends a little before the database's now.
            base = (db_now_ms(conn) - HOUR - 60_000) // 1_000 * 1_000
            plans = _hour_plans(schedules, base)
            create_schedules(conn, plans)
            conn.execute(load_sql("prune_short_tasks"))
            ids = schedule_ids(conn, plans)
            tasks = conn.execute(load_sql("prune_schedule_tasks"), {"ids": ids}).fetchall()
            pairs = [(int(row["schedule_id"]), int(row["task_id"])) for row in tasks]
            for hour in range(hours):
                cluster.set_clock_offset_ms(hour * HOUR)
                if hour:
                    start = base + hour * HOUR
                    _write_runs(conn, _hour_plans(schedules, start), pairs)
                    conn.execute(
                        load_sql("prune_hour_cursor"), {"cursor_ms": start + HOUR, "ids": ids}
                    )
                conn.execute(load_sql("prune_settle_attempts"))
                vacuums = _vacuums(conn)
                lsn = _lsn(conn)
                started = time.monotonic()
                report = prune_history(admin, older_than_ms=RETAIN_MS, batch=BATCH)
                prune_s = time.monotonic() - started
                wal = _wal_bytes(conn, lsn)
                if autovacuum:
                    vacuumed = _await_autovacuum(conn, vacuums)
                else:
                    conn.execute(load_sql("prune_vacuum"))
                    vacuumed = True
                sizes = _sizes(conn)
                rows.append(
                    {
                        "hour": hour + 1,
                        "runs": sizes["runs"],
                        "removed": report.runs,
                        "prune_s": round(prune_s, 2),
                        "wal_mb": round(wal / 2**20, 1),
                        "history_mb": round(sizes["history_bytes"] / 2**20, 1),
                        "database_mb": round(sizes["database_bytes"] / 2**20, 1),
                        "vacuumed": vacuumed,
                    }
                )
                print(f"# prune hourly {rows[-1]}", file=sys.stderr, flush=True)
        verdict = verify_history(admin, stale_claim_grace_ms=0)
    finally:
        cluster.set_clock_offset_ms(0)
        drop_database(cluster, database.name)
    # The retention (2 h) is full from hour 3 on; the plateau must not rise after the first half.
    sizes_mb = [row["database_mb"] for row in rows]
    half = max(1, len(sizes_mb) // 2)
    first, second = max(sizes_mb[:half]), max(sizes_mb[half:] or sizes_mb)
    full = sizes_mb[min(2, len(sizes_mb) - 1)]
    return ctx.emit(
        "prune_hourly",
        {
            "schedules": schedules,
            "hours": hours,
            "vacuum": "autovacuum (naptime 1 s)" if autovacuum else "VACUUM after each prune",
            "retain_h": RETAIN_MS // HOUR,
            "per_hour": rows,
            "verify_ok": verdict.ok,
            "plateau_over_full": round(second / full, 2),
            "met": {"flat": second <= first * (1 + FLAT_TOLERANCE), "verify_ok": verdict.ok},
        },
    )


def run_prune(
    ctx: BenchContext,
    sizes: list[tuple[int, int]] | None = None,
    hours: int | None = None,
    *,
    autovacuum: bool = False,
) -> list[dict[str, Any]]:
    """Prune at scale on a durable cluster, then hour after hour on a faked database clock.

    `sizes` (schedules, occurrences) replaces the default scale (an empty list skips it);
    `hours` the simulated hours (0 skips the hourly run); `autovacuum` leaves the hourly
    vacuuming to autovacuum.
    """
    results = []
    chosen = (QUICK_SCALE if ctx.quick else SCALE) if sizes is None else sizes
    if chosen:
        with _cluster(faketime=False) as cluster:
            results += [_scale(ctx, cluster, *size) for size in chosen]
    if hours != 0:
        with _cluster(faketime=True) as cluster:
            results.append(_hourly(ctx, cluster, hours, autovacuum=autovacuum))
    return results
