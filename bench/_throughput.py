"""Benchmark 1: catch-up throughput while draining a backlog, against the bare-SQL baseline.

N schedules `* * * * * *` with `catch_up` get their cursors set ten minutes back (superuser
SQL, `sql/set_backlog.sql`), so N x 600 occurrences are due at once and N more every second. Workers
start; after the first admission and a warm-up, the harness reads the database time t0, waits
a fixed window, reads t1, and counts the runs whose commit time (`runs.created_at_ms`, written by
the database) lies in [t0, t1). Rate = that count per second of database time. The backlog is
checked to be still there at t1 (otherwise the rate would be capped by the schedules, not the
scheduler). The baseline does the same work per commit (QL3's default claim batch, sized down the
same way while backlogs spend the budget, up to the budget of 256 occurrences) and
runs at R = 1, 2, 4 like QL3, interleaved with it (baseline R, QL3 R, for each R, then again):
each ratio QL3 / baseline is taken at the same R, from the means over the passes. The steady
state (one occurrence per schedule per round) is `_burst.py`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._common import BASELINE_LABEL, DEFAULTS_LABEL, db_now_ms, wait_until
from ._meters import (
    CpuMeter,
    WaitSampler,
    WalMeter,
    login_user,
    reset_statement_stats,
    statement_stats,
)
from ._replicas import ReplicaSet, bench_workers
from ._sql import connect, load_sql
from ._targets import RN_VS_R1, VS_BASELINE

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["run_throughput"]

# The brief's "cursors a minute back" (120 000 occurrences) is drained by QL3 in seconds, because
# a catch_up decision admits up to the whole cycle budget for one claim; ten minutes (1.2 million
# occurrences) keep the backlog alive through warm-up and window for every cell at 40 000+/s
# (checked: "behind at end" > 0 for every cell, else the summary says the backlog ran dry).
BACKLOG_MS = 600_000
REPLICA_COUNTS = (1, 2, 4)
TARGET_R1_VS_BASELINE = VS_BASELINE
TARGET_RN_VS_R1 = RN_VS_R1


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {"schedules": 1000, "warmup_s": 1.5, "window_s": 3.0, "passes": 1}
    return {"schedules": 2000, "warmup_s": 3.0, "window_s": 6.0, "passes": 2}


def _workers(ctx: BenchContext, db: Ql3Database, variant: str, replicas: int) -> ReplicaSet:
    owners = [f"{variant}-r{index}" for index in range(1, replicas + 1)]
    return bench_workers(variant, db.dsn("runtime"), owners, ctx.work_dir / db.name, period_ms=1000)


def _measure_cell(
    ctx: BenchContext, template: Ql3Database, variant: str, replicas: int, params: dict[str, Any]
) -> dict[str, Any]:
    db = ctx.database("tput", template=template.name)
    try:
        with connect(db.superuser_dsn) as su:
            su.execute(load_sql("set_backlog"), {"backlog_ms": BACKLOG_MS})
            workers = _workers(ctx, db, variant, replicas)
            with workers:
                _wait_first_admission(su, workers)
                time.sleep(params["warmup_s"])
                meter = CpuMeter(su, login_user(db.dsn("runtime")), workers.pids)
                meter.start()
                wal = WalMeter(su)
                wal.start()
                waits = WaitSampler(db.superuser_dsn, login_user(db.dsn("runtime")))
                waits.start()
                reset_statement_stats(su)
                t0 = db_now_ms(su)
                time.sleep(params["window_s"])
                t1 = db_now_ms(su)
                window = {"since_ms": t0, "until_ms": t1}
                per_owner = {
                    row["owner_id"]: int(row["admissions"])
                    for row in su.execute(load_sql("window_admissions"), window)
                }
                cpu = meter.stop(sum(per_owner.values()))
                disk = wal.stop(sum(per_owner.values()), ctx.disk.get("flushes_per_s"))
                statements = statement_stats(su)
                backend_states = waits.stop()
                backlog = su.execute(load_sql("backlog"), {"at_ms": t1}).fetchone() or {}
                exit_codes = workers.stop()
            history = su.execute(load_sql("history_check")).fetchone() or {}
            ctx.refresh_machine(su)
    finally:
        ctx.drop(db)
    admissions = sum(per_owner.values())
    return ctx.emit(
        "throughput",
        {
            "variant": variant,
            "replicas": replicas,
            "schedules": params["schedules"],
            "backlog_ms": BACKLOG_MS,
            "settings": DEFAULTS_LABEL if variant == "ql3" else BASELINE_LABEL,
            "window_ms": t1 - t0,
            "admissions": admissions,
            "rate_per_s": round(admissions * 1000 / (t1 - t0), 1),
            "per_owner": per_owner,
            **cpu,
            **disk,
            "behind_at_end": int(backlog.get("behind", 0)),
            "duplicates": int(history["duplicates"]),
            "early": int(history["early"]),
            "rows": {k: int(history[k]) for k in ("runs", "attempts", "events", "claims_held")},
            "serialization_retries_window": workers.serialization_retries(
                since_ms=t0 if variant == "ql3" else None, until_ms=t1 if variant == "ql3" else None
            ),
            "serialization_retries_total": workers.serialization_retries(
                since_ms=None, until_ms=None
            ),
            "exit_codes": exit_codes,
            "server_statements": statements,
            "backend_states": backend_states,
        },
    )


def _wait_first_admission(su: Any, workers: ReplicaSet) -> None:  # noqa: ANN401 - psycopg conn
    def ready() -> bool:
        if not workers.alive():
            return True
        row = su.execute(load_sql("run_count")).fetchone()
        return bool(row and row["runs"] > 0)

    if not wait_until(ready, timeout_s=60) or not workers.alive():
        tails = "\n".join(f"--- {o}\n{workers.tail(o)}" for o in workers.owners)
        msg = f"workers did not admit anything within 60 s (or died):\n{tails}"
        raise RuntimeError(msg)


def _mean_rates(cells: list[dict[str, Any]], variant: str) -> dict[int, float]:
    return {
        r: sum(rates) / len(rates)
        for r in REPLICA_COUNTS
        if (
            rates := [
                c["rate_per_s"] for c in cells if c["variant"] == variant and c["replicas"] == r
            ]
        )
    }


def run_throughput(ctx: BenchContext) -> list[dict[str, Any]]:
    """Measure the baseline and QL3 at R=1,2,4, interleaved; emit cells and a summary."""
    params = _params(ctx.quick)
    template = ctx.schedules_database("tput", ["* * * * * *"] * params["schedules"])
    cells: list[dict[str, Any]] = []
    # Interleaved passes (baseline R, QL3 R for each R, then again): background load on the
    # shared machine drifts, and interleaving spreads it over every variant instead of biasing
    # a ratio.
    for _ in range(params["passes"]):
        for r in REPLICA_COUNTS:
            cells.append(_measure_cell(ctx, template, "baseline", r, params))
            cells.append(_measure_cell(ctx, template, "ql3", r, params))
    ctx.drop(template)
    baseline = _mean_rates(cells, "baseline")
    ql3 = _mean_rates(cells, "ql3")
    ratios = {
        **{f"r{r}_vs_baseline": round(ql3[r] / baseline[r], 3) for r in ql3},
        **{f"r{r}_vs_r1": round(ql3[r] / ql3[1], 3) for r in REPLICA_COUNTS if r != 1},
        **{
            f"baseline_r{r}_vs_r1": round(baseline[r] / baseline[1], 3)
            for r in REPLICA_COUNTS
            if r != 1
        },
    }
    met = {
        **{f"r{r}_vs_baseline": ratios[f"r{r}_vs_baseline"] >= TARGET_R1_VS_BASELINE for r in ql3},
        **{
            f"r{r}_vs_r1": ratios[f"r{r}_vs_r1"] >= TARGET_RN_VS_R1
            for r in REPLICA_COUNTS
            if r != 1
        },
        "duplicates": all(c["duplicates"] == 0 for c in cells),
        "backlog_kept": all(c["behind_at_end"] > 0 for c in cells),
    }
    summary = ctx.emit(
        "throughput_summary",
        {
            "baseline_rate_per_s": {str(r): round(rate, 1) for r, rate in baseline.items()},
            "ql3_rate_per_s": {str(r): round(rate, 1) for r, rate in ql3.items()},
            "ratios": ratios,
            "targets": {
                "rN_vs_baseline": f">= {VS_BASELINE}",
                "rN_vs_r1": f">= {RN_VS_R1}",
                "duplicates": "0",
            },
            "met": met,
        },
    )
    return [*cells, summary]
