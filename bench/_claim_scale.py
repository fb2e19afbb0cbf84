"""Benchmark 3: latency of the claim statement with 1k, 10k and 100k schedules, 16 of them due.

The 16 due schedules are created with ScheduleAdmin and made due a second ago (superuser SQL);
the idle ones are bulk-inserted with one INSERT ... SELECT as the superuser, cursors ten years
ahead (`sql/bulk_idle_schedules.sql`), and the table is ANALYZEd. Each sample times one
`PostgresScheduleRepository.claim_due_schedules(command, 16)` with `time.perf_counter()` (a
duration, not a time value), then releases the 16 claims untimed, so the same 16 stay due.
The sizes grow in one database: 1k, then +9k, then +90k idle rows.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin
from ql3_runtime_core import ClaimClusterScheduleCommand, ScheduleDefinition

from ._common import connect, load_sql

if TYPE_CHECKING:
    from ._common import BenchContext

__all__ = ["run_claim_scale"]

DUE = 16
TARGET_RATIO = 1.5
OWNER = "bench-claim"


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {"sizes": (1_000, 10_000), "samples": 100, "warmup": 20}
    return {"sizes": (1_000, 10_000, 100_000), "samples": 400, "warmup": 50}


def _sample(repo: PostgresScheduleRepository, samples: int) -> list[float]:
    durations: list[float] = []
    for _ in range(samples):
        command = ClaimClusterScheduleCommand(owner_id=OWNER, claim_token=uuid.uuid4())
        started = time.perf_counter()
        claims = repo.claim_due_schedules(command, DUE)
        durations.append((time.perf_counter() - started) * 1000)
        if len(claims) != DUE:
            msg = f"claim returned {len(claims)} schedules, expected the {DUE} due ones"
            raise RuntimeError(msg)
        repo.release_claims(claims)
    return durations


def run_claim_scale(ctx: BenchContext) -> list[dict[str, Any]]:
    """Time the claim at each table size; emit one line per size and a ratio summary."""
    params = _params(ctx.quick)
    db = ctx.database("claim")
    cells: list[dict[str, Any]] = []
    try:
        with ScheduleAdmin(db.dsn("admin")) as admin:
            for index in range(DUE):
                admin.add_schedule(f"due-{index:02d}", ScheduleDefinition(cron="* * * * * *"))
        with (
            connect(db.superuser_dsn) as su,
            PostgresScheduleRepository(db.dsn("runtime"), application_name=OWNER) as repo,
        ):
            su.execute(load_sql("set_due"), {"prefix": "due-"})
            present = DUE
            for size in params["sizes"]:
                su.execute(load_sql("bulk_idle_schedules"), {"first": present, "last": size - 1})
                su.execute(load_sql("analyze"))
                present = size
                _sample(repo, params["warmup"])
                durations = _sample(repo, params["samples"])
                ctx.refresh_machine(su)
                cells.append(_emit_cell(ctx, size, durations))
    finally:
        ctx.drop(db)
    by_size = {c["schedules"]: c for c in cells}
    smallest, largest = min(by_size), max(by_size)
    ratio = by_size[largest]["p50_ms"] / by_size[smallest]["p50_ms"]
    ratio_p99 = by_size[largest]["p99_ms"] / by_size[smallest]["p99_ms"]
    summary = ctx.emit(
        "claim_scale_summary",
        {
            "ratio_of": f"{largest}:{smallest}",
            "ratio_p50": round(ratio, 3),
            "ratio_p99": round(ratio_p99, 3),
            "target_ratio": f"<= {TARGET_RATIO}",
            "met": {"ratio_p50": ratio <= TARGET_RATIO},
        },
    )
    return [*cells, summary]


def _emit_cell(ctx: BenchContext, size: int, durations: list[float]) -> dict[str, Any]:
    percentiles = statistics.quantiles(durations, n=100, method="inclusive")
    return ctx.emit(
        "claim_scale",
        {
            "schedules": size,
            "due": DUE,
            "limit": DUE,
            "samples": len(durations),
            "p50_ms": round(statistics.median(durations), 3),
            "p99_ms": round(percentiles[98], 3),
            "max_ms": round(max(durations), 3),
            "mean_ms": round(statistics.fmean(durations), 3),
            "timed": "PostgresScheduleRepository.claim_due_schedules (client round trip)",
        },
    )
