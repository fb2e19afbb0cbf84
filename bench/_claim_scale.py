"""Benchmark 3: latency of the claim statement with 1k, 10k, 100k and 1M schedules, 16 of them due.

The 16 due schedules are created with ScheduleAdmin and made due a second ago (superuser SQL);
the idle ones are bulk-inserted with one INSERT ... SELECT as the superuser, cursors ten years
ahead (`sql/bulk_idle_schedules.sql`), and the table is ANALYZEd. Each sample times one
`PostgresScheduleRepository.claim_due_schedules(command, 16)` with `time.perf_counter()` (a
duration, not a time value), then releases the 16 claims untimed, so the same 16 stay due.
Each size has its own database and the sizes are sampled round-robin.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import ConnectionSettings, PostgresScheduleRepository, ScheduleAdmin
from ql3_runtime_core import ClaimClusterScheduleCommand, ScheduleDefinition

from ._meters import claim_statement_stats, reset_statement_stats, statement_stats
from ._sql import connect, load_sql
from ._targets import CLAIM_RATIO

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["run_claim_scale"]

DUE = 16
TARGET_RATIO = CLAIM_RATIO
OWNER = "bench-claim"


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {"sizes": (1_000, 10_000), "samples": 100, "warmup": 20}
    return {"sizes": (1_000, 10_000, 100_000, 1_000_000), "samples": 300, "warmup": 30}


def _claim_once(repo: PostgresScheduleRepository) -> float:
    """Time one claim of the 16 due schedules (ms), then release them untimed."""
    command = ClaimClusterScheduleCommand(owner_id=OWNER, claim_token=uuid.uuid4())
    started = time.perf_counter()
    claims = repo.claim_due_schedules(command, DUE)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if len(claims) != DUE:
        msg = f"claim returned {len(claims)} schedules, expected the {DUE} due ones"
        raise RuntimeError(msg)
    repo.release_claims(claims)
    return elapsed_ms


def _prepare(ctx: BenchContext, size: int) -> Ql3Database:
    """Create a database with 16 due schedules (ScheduleAdmin) and `size - 16` idle ones (SQL)."""
    db = ctx.database(f"claim{size}")
    with ScheduleAdmin(db.dsn("admin")) as admin:
        for index in range(DUE):
            admin.add_schedule(f"due-{index:02d}", ScheduleDefinition(cron="* * * * * *"))
    with connect(db.superuser_dsn) as su:
        su.execute(load_sql("set_due"), {"prefix": "due-"})
        su.execute(load_sql("bulk_idle_schedules"), {"first": DUE, "last": size - 1})
        su.execute(load_sql("analyze"))
    return db


def run_claim_scale(ctx: BenchContext) -> list[dict[str, Any]]:
    """Time the claim at each table size; emit one line per size and a ratio summary.

    One database per size, sampled round-robin (1k, 10k, 100k, 1k, ...), so background load on
    the shared machine hits every size alike instead of biasing the ratio.
    """
    params = _params(ctx.quick)
    sizes: tuple[int, ...] = params["sizes"]
    databases: dict[int, Ql3Database] = {}
    durations: dict[int, list[float]] = {size: [] for size in sizes}
    server: dict[int, list[dict[str, Any]]] = {}
    claim_stats: dict[int, dict[str, Any]] = {}
    try:
        for size in sizes:
            databases[size] = _prepare(ctx, size)
        with contextlib.ExitStack() as stack:
            repos = {
                size: stack.enter_context(
                    PostgresScheduleRepository(
                        db.dsn("runtime"), connection=ConnectionSettings(application_name=OWNER)
                    )
                )
                for size, db in databases.items()
            }
            for _ in range(params["warmup"]):
                for repo in repos.values():
                    _claim_once(repo)
            for db in databases.values():
                with connect(db.superuser_dsn) as su:
                    reset_statement_stats(su)
            for _ in range(params["samples"]):
                for size, repo in repos.items():
                    durations[size].append(_claim_once(repo))
        for size, db in databases.items():
            with connect(db.superuser_dsn) as su:
                server[size] = statement_stats(su, limit=2)
                claim_stats[size] = claim_statement_stats(su)
                ctx.refresh_machine(su)
    finally:
        for db in databases.values():
            ctx.drop(db)
    cells = [
        _emit_cell(ctx, size, durations[size], server[size], claim_stats[size]) for size in sizes
    ]
    smallest, largest = min(sizes), max(sizes)
    ratio = statistics.median(durations[largest]) / statistics.median(durations[smallest])
    ratio_p99 = cells[-1]["p99_ms"] / cells[0]["p99_ms"]
    summary = ctx.emit(
        "claim_scale_summary",
        {
            "ratio_of": f"{largest}:{smallest}",
            "ratio_p50": round(ratio, 3),
            "ratio_p99": round(ratio_p99, 3),
            "server_exec_ratio": _server_ratio(claim_stats[largest], claim_stats[smallest]),
            "server_replanned": {size: claim_stats[size].get("plans") for size in sizes},
            "target_ratio": f"<= {TARGET_RATIO}",
            "met": {"ratio_p50": ratio <= TARGET_RATIO},
        },
    )
    return [*cells, summary]


def _server_ratio(largest: dict[str, Any], smallest: dict[str, Any]) -> float | None:
    """Ratio of the claim statement's mean execution time in the server (pg_stat_statements)."""
    big, small = largest.get("mean_exec_ms"), smallest.get("mean_exec_ms")
    return round(big / small, 3) if big and small else None


def _emit_cell(
    ctx: BenchContext,
    size: int,
    durations: list[float],
    server: list[dict[str, Any]],
    claim: dict[str, Any],
) -> dict[str, Any]:
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
            "server_claim": claim,
            "server_statements": server,
        },
    )
