"""Benchmark 1b: a burst at the top of the minute, and the steady-state rate it drains at.

S schedules `* * * * *` (`catch_up`), cloned from one template; every cursor is set (superuser
SQL, `sql/set_cursor_at.sql`) to the next minute boundary of the database clock that is at least
LEAD_S away, then R workers start and idle until it. At the boundary all S occurrences fall due
at once, each schedule exactly once: every round claims 16 schedules and admits one occurrence
of each, which is the steady state (no catch-up batching helps either side). The
harness polls the database until all S runs of that instant exist (or DEADLINE_S passes), then
reads the verdict from the database: admitted / missing / duplicate / early, lateness
(`runs.created_at_ms - scheduled_for_ms`) p50 / p99, the drain time (the last admission's
lateness) and the rate S / drain time. The bare-SQL baseline (same claim batch, same budget, same
session settings) drains the same burst at the same R, interleaved with QL3 (baseline R, QL3 R).
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
from ._targets import BURST_DRAIN_S, BURST_REPLICAS

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["BURST_CRON", "run_burst"]

BURST_CRON = "* * * * *"
PERIOD_MS = 60_000
LEAD_S = 8.0  # workers start and settle before the boundary
DEADLINE_S = 55.0  # the next minute's occurrences fall due at +60 s
TARGET_DRAIN_S = BURST_DRAIN_S
TARGET_REPLICAS = BURST_REPLICAS


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {"schedules": 2_000, "replicas": (4,)}
    return {"schedules": 100_000, "replicas": (1, 2, 4)}


def _workers(ctx: BenchContext, db: Ql3Database, variant: str, replicas: int) -> ReplicaSet:
    owners = [f"{variant}-r{index}" for index in range(1, replicas + 1)]
    log_dir = ctx.work_dir / db.name
    return bench_workers(variant, db.dsn("runtime"), owners, log_dir, period_ms=PERIOD_MS)


def _next_boundary(now_ms: int) -> int:
    boundary = (now_ms // PERIOD_MS + 1) * PERIOD_MS
    return boundary if boundary - now_ms >= LEAD_S * 1000 else boundary + PERIOD_MS


def _measure_cell(
    ctx: BenchContext, template: Ql3Database, variant: str, replicas: int, size: int
) -> dict[str, Any]:
    db = ctx.database("burst", template=template.name)
    user = login_user(db.dsn("runtime"))
    try:
        with connect(db.superuser_dsn) as su:
            at_ms = _next_boundary(db_now_ms(su))
            su.execute(load_sql("set_cursor_at"), {"at_ms": at_ms})
            su.execute(load_sql("analyze"))
            with _workers(ctx, db, variant, replicas) as workers:
                # Sleep (monotonic) until a second before the boundary of the database clock.
                time.sleep(max(0.0, (at_ms - db_now_ms(su)) / 1000 - 1.0))
                if not workers.alive():
                    tails = "\n".join(f"--- {o}\n{workers.tail(o)}" for o in workers.owners)
                    msg = f"burst workers died before the boundary:\n{tails}"
                    raise RuntimeError(msg)
                meter = CpuMeter(su, user, workers.pids)
                meter.start()
                wal = WalMeter(su)
                wal.start()
                waits = WaitSampler(db.superuser_dsn, user)
                waits.start()
                reset_statement_stats(su)

                def drained() -> bool:
                    row = su.execute(load_sql("burst_admitted"), {"at_ms": at_ms}).fetchone()
                    return bool(row and row["runs"] >= size) or not workers.alive()

                time.sleep(max(0.0, (at_ms - db_now_ms(su)) / 1000))
                done = wait_until(drained, timeout_s=DEADLINE_S, interval_s=0.1)
                cpu = meter.stop(size)
                disk = wal.stop(size, ctx.disk.get("flushes_per_s"))
                statements = statement_stats(su)
                backend_states = waits.stop()
                exit_codes = workers.stop()
            verdict = dict(su.execute(load_sql("burst_verdict"), {"at_ms": at_ms}).fetchone() or {})
            ctx.refresh_machine(su)
    finally:
        ctx.drop(db)
    drain_ms = verdict.get("drain_ms")
    admitted = int(verdict.get("admitted") or 0)
    # CPU per admission over what was admitted (a burst not drained by the deadline admits less).
    for side in ("worker", "backend"):
        cpu[f"{side}_cpu_ms_per_admission"] = (
            round(float(cpu[f"{side}_cpu_s"] or 0) * 1000 / admitted, 4) if admitted else None
        )
    target = TARGET_DRAIN_S if replicas == TARGET_REPLICAS else None
    clean = all(int(verdict.get(k) or 0) == 0 for k in ("missing", "duplicates", "early"))
    return ctx.emit(
        "burst",
        {
            "variant": variant,
            "replicas": replicas,
            "schedules": size,
            "cron": BURST_CRON,
            "settings": DEFAULTS_LABEL if variant == "ql3" else BASELINE_LABEL,
            "at_ms": at_ms,
            "drained": done,
            **{k: (int(v) if v is not None else None) for k, v in verdict.items()},
            "drain_s": round(drain_ms / 1000, 2) if drain_ms is not None else None,
            "rate_per_s": round(admitted * 1000 / drain_ms, 1) if drain_ms else None,
            "target_drain_s": target,
            **cpu,
            **disk,
            "met": {
                "clean": clean,
                **(
                    {"drain": drain_ms is not None and drain_ms / 1000 <= target and clean}
                    if target is not None
                    else {}
                ),
            },
            "serialization_retries_total": workers.serialization_retries(
                since_ms=None, until_ms=None
            ),
            "exit_codes": exit_codes,
            "server_statements": statements,
            "backend_states": backend_states,
        },
    )


def run_burst(ctx: BenchContext) -> list[dict[str, Any]]:
    """Drain the burst with the baseline and QL3 at each R (interleaved); emit a summary."""
    params = _params(ctx.quick)
    size = params["schedules"]
    template = ctx.shared_schedules("burst", BURST_CRON, size)
    cells: list[dict[str, Any]] = []
    for replicas in params["replicas"]:
        cells.append(_measure_cell(ctx, template, "baseline", replicas, size))
        cells.append(_measure_cell(ctx, template, "ql3", replicas, size))
    rates = {
        variant: {str(c["replicas"]): c["rate_per_s"] for c in cells if c["variant"] == variant}
        for variant in ("baseline", "ql3")
    }
    ratios = {
        f"r{r}_vs_baseline": round(rate / base, 3)
        for r, rate in rates["ql3"].items()
        if rate and (base := rates["baseline"].get(r))
    }
    summary = ctx.emit(
        "burst_summary",
        {
            "schedules": size,
            "rate_per_s": rates,
            "drain_s": {
                variant: {
                    str(c["replicas"]): c["drain_s"] for c in cells if c["variant"] == variant
                }
                for variant in ("baseline", "ql3")
            },
            "ratios": ratios,
            "targets": {"drain_s_r4": f"<= {TARGET_DRAIN_S}", "missing": "0"},
        },
    )
    return [*cells, summary]
