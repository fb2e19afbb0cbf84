"""Benchmark 7: the worker (execution), `python -m bench worker`.

Every figure is read from the database's own timestamps (`runs.created_at_ms`, the attempts'
`started_at_ms` / `finished_at_ms`); the harness only paces with `time.monotonic()`. Workers are
OS processes (`bench/_worker_child.py`), started and idle before the work is admitted, so their
start-up is never inside a window. Work is admitted by `bench/sql/worker_seed.sql`: the rows an
admission commit writes, in one transaction at one database instant, notifying
`ql3_attempt_queued` once as an admission does (migration 0015).

- throughput: a backlog of no-op Python tasks drained by 4 QL3 workers (4 slots each), then the
  same backlog by 4 bare SKIP LOCKED take/finish loops writing the same rows, alternating, every
  pass reported; rate = succeeded / (last finish - first start).
- start latency: with 4 idle QL3 workers, Runs admitted one at a time; admission -> attempt start
  at p50 / p99 / max, with LISTEN (the default) and, for comparison, polling only.
- command burst: 1,000 Runs of `true` admitted at one instant, 2 QL3 workers; the instant -> the
  last attempt's end, every pass, per slot count (the default 4, and 16).
- RSS: one QL3 worker under a steady stream of no-op tasks for 10 minutes (`--quick`: 1), its
  VmRSS from /proc every second, kept at the end of each minute.
- NOTIFY cost: admitting transactions per second from 4 connections at once, with migration
  0015's trigger on and off (alternating passes), one Run per transaction (the worst case: the
  notification's share of a commit is largest), no worker running.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from ql3_cluster_control import WorkerSettings

from ._common import db_now_ms
from ._meters import memory_kb
from ._sql import connect, load_sql
from ._targets import WORKER
from ._worker_child import NOOP_TASK
from ._worker_tools import (
    NOTIFY_CONNECTIONS,
    SHELL_TASK,
    child,
    last_run,
    read_window,
    seed,
    setup,
    started_workers,
    wait_drained,
    wait_ready,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["TARGETS", "run_worker"]

TARGETS: Final = WORKER
# The worker's default slot count, read from its settings model: the burst is judged with it.
DEFAULT_SLOTS: Final[int] = WorkerSettings.model_fields["concurrency"].default


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {
            "backlog": 2_000,
            "tput_passes": 1,
            "latency_runs": 40,
            "burst_commands": 1_000,
            "burst_passes": 2,
            "burst_slots": (DEFAULT_SLOTS, 16),
            "rss_s": 60.0,
            "rss_rate_per_s": 50,
            "notify_txns": 200,
            "notify_passes": 2,
        }
    return {
        "backlog": 20_000,
        "tput_passes": 3,
        "latency_runs": 300,
        "burst_commands": 1_000,
        "burst_passes": 5,
        "burst_slots": (DEFAULT_SLOTS, 16),
        "rss_s": 600.0,
        "rss_rate_per_s": 50,
        "notify_txns": 1_000,
        "notify_passes": 3,
    }


def _throughput(ctx: BenchContext, db: Ql3Database, params: dict[str, Any]) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    log_dir = ctx.work_dir / "worker-throughput"
    log_dir.mkdir(parents=True, exist_ok=True)
    with connect(db.superuser_dsn) as su:
        for index in range(params["tput_passes"]):
            for variant in ("ql3", "bare"):
                if variant == "ql3":
                    commands = {
                        f"q{i}": child("ql3", db.dsn("worker_ingress"), f"q{index}-{i}")
                        for i in range(4)
                    }
                    listeners = 4  # each: its pool's first connection and its listener
                else:
                    commands = {
                        f"b{i}": child("bare", db.dsn("owner"), f"b{index}-{i}") for i in range(4)
                    }
                    listeners = 0
                with started_workers(commands, log_dir) as running:
                    wait_ready(
                        su,
                        running,
                        prefix=f"{variant[0]}{index}-",
                        sessions=4 + listeners,
                        listeners=listeners,
                    )
                    after = last_run(su)
                    seed(su, NOOP_TASK, params["backlog"])
                    wait_drained(su, running)
                window = read_window(su, after)
                span_ms = max(1, window["last_finished_ms"] - window["first_started_ms"])
                ctx.refresh_machine(su)
                cells.append(
                    ctx.emit(
                        "worker_throughput",
                        {
                            "pass": index + 1,
                            "variant": variant,
                            "workers": 4,
                            "backlog": params["backlog"],
                            "succeeded": window["succeeded"],
                            "other_ends": window["other_ends"],
                            "span_ms": span_ms,
                            "rate_per_s": round(window["succeeded"] * 1000 / span_ms, 1),
                        },
                    )
                )
    return cells


def _latency(ctx: BenchContext, db: Ql3Database, params: dict[str, Any]) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    log_dir = ctx.work_dir / "worker-latency"
    log_dir.mkdir(parents=True, exist_ok=True)
    with connect(db.superuser_dsn) as su:
        for listen in (True, False):
            extra = [] if listen else ["--no-listen"]
            commands = {
                f"l{i}": child("ql3", db.dsn("worker_ingress"), f"l{int(listen)}-{i}", *extra)
                for i in range(4)
            }
            with started_workers(commands, log_dir) as running:
                wait_ready(
                    su,
                    running,
                    prefix=f"l{int(listen)}-",
                    sessions=8 if listen else 4,
                    listeners=4 if listen else 0,
                )
                after = last_run(su)
                for _ in range(params["latency_runs"]):
                    seed(su, NOOP_TASK, 1)
                    time.sleep(0.05)
                wait_drained(su, running)
            window = read_window(su, after)
            ctx.refresh_machine(su)
            cells.append(
                ctx.emit(
                    "worker_start_latency",
                    {
                        "listen": listen,
                        "workers": 4,
                        "poll_interval_ms": 1_000,
                        "runs": window["attempts"],
                        "p50_ms": window["start_p50_ms"],
                        "p99_ms": window["start_p99_ms"],
                        "max_ms": window["start_max_ms"],
                        "target_p99_ms": TARGETS["start_p99_ms"] if listen else None,
                    },
                )
            )
    return cells


def _burst(ctx: BenchContext, db: Ql3Database, params: dict[str, Any]) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    log_dir = ctx.work_dir / "worker-burst"
    log_dir.mkdir(parents=True, exist_ok=True)
    with connect(db.superuser_dsn) as su:
        for slots in params["burst_slots"]:
            commands = {
                f"c{i}": child(
                    "ql3",
                    db.dsn("worker_ingress"),
                    f"c{slots}-{i}",
                    "--commands",
                    "--concurrency",
                    str(slots),
                )
                for i in range(2)
            }
            passes: list[float] = []
            with started_workers(commands, log_dir) as running:
                wait_ready(su, running, prefix=f"c{slots}-", sessions=4, listeners=2)
                for _ in range(params["burst_passes"]):
                    after = last_run(su)
                    admitted_at = seed(su, SHELL_TASK, params["burst_commands"])
                    wait_drained(su, running)
                    window = read_window(su, after)
                    passes.append(round((window["last_finished_ms"] - admitted_at) / 1000, 3))
            ctx.refresh_machine(su)
            cells.append(
                ctx.emit(
                    "worker_burst",
                    {
                        "commands": params["burst_commands"],
                        "workers": 2,
                        "slots_per_worker": slots,
                        "last_finished_s_passes": passes,
                        "worst_s": max(passes),
                        "median_s": statistics.median(passes),
                        "target_s": TARGETS["burst_last_finished_s"],
                    },
                )
            )
    return cells


def _rss(ctx: BenchContext, db: Ql3Database, params: dict[str, Any]) -> dict[str, Any]:
    log_dir = ctx.work_dir / "worker-rss"
    log_dir.mkdir(parents=True, exist_ok=True)
    per_minute: list[float] = []
    last = peak = 0
    with connect(db.superuser_dsn) as su:
        commands = {"r0": child("ql3", db.dsn("worker_ingress"), "rss-0")}
        with started_workers(commands, log_dir) as running:
            wait_ready(su, running, prefix="rss-", sessions=2, listeners=1)
            after = last_run(su)
            started = time.monotonic()
            next_mark = started + 60.0
            while time.monotonic() - started < params["rss_s"] and running.alive():
                seed(su, NOOP_TASK, params["rss_rate_per_s"])
                status = memory_kb(running.pids[0])
                last, peak = status.get("VmRSS", 0), max(peak, status.get("VmHWM", 0))
                if time.monotonic() >= next_mark:
                    per_minute.append(round(last / 1024, 1))
                    next_mark += 60.0
                time.sleep(1.0)
            wait_drained(su, running)
        window = read_window(su, after)
        ctx.refresh_machine(su)
    rss_mb = round(last / 1024, 1)
    return ctx.emit(
        "worker_rss",
        {
            "run_s": params["rss_s"],
            "rate_per_s": params["rss_rate_per_s"],
            "executed": window["succeeded"],
            "rss_end_mb": rss_mb,
            "rss_peak_mb": round(peak / 1024, 1),
            "rss_per_minute_mb": per_minute,
            "target_mb": TARGETS["rss_mb"],
            "met": rss_mb <= TARGETS["rss_mb"],
        },
    )


def _admit_loop(dsn: str, task: str, count: int) -> None:
    with connect(dsn) as conn:
        for _ in range(count):
            seed(conn, task, 1)


def _notify_cost(ctx: BenchContext, db: Ql3Database, params: dict[str, Any]) -> dict[str, Any]:
    """Admitting transactions/s, 4 connections at once, with the notification trigger on / off."""
    rates: dict[str, list[float]] = {"on": [], "off": []}
    with connect(db.superuser_dsn) as su:
        for _ in range(params["notify_passes"]):
            for variant in ("on", "off"):
                su.execute(load_sql(f"worker_notify_{variant}"))
                threads = [
                    threading.Thread(
                        target=_admit_loop,
                        args=(db.superuser_dsn, f"notify-{index}", params["notify_txns"]),
                    )
                    for index in range(NOTIFY_CONNECTIONS)
                ]
                started = time.monotonic()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                elapsed = time.monotonic() - started
                total = NOTIFY_CONNECTIONS * params["notify_txns"]
                rates[variant].append(round(total / elapsed, 1))
        su.execute(load_sql("worker_notify_on"))
        ctx.refresh_machine(su)
    ratios = [round(on / off, 3) for on, off in zip(rates["on"], rates["off"], strict=True)]
    return ctx.emit(
        "worker_notify_cost",
        {
            "connections": NOTIFY_CONNECTIONS,
            "runs_per_transaction": 1,
            "transactions_per_pass": NOTIFY_CONNECTIONS * params["notify_txns"],
            "with_trigger_per_s": rates["on"],
            "without_trigger_per_s": rates["off"],
            "ratio_passes": ratios,
            "ratio_median": statistics.median(ratios),
        },
    )


def run_worker(ctx: BenchContext) -> list[dict[str, Any]]:
    """Run the four worker measurements on one fresh database; emit a summary line last."""
    params = _params(ctx.quick)
    db = setup(ctx)
    with connect(db.superuser_dsn) as su:
        started_ms = db_now_ms(su)
    tput = _throughput(ctx, db, params)
    latency = _latency(ctx, db, params)
    burst = _burst(ctx, db, params)
    rss = _rss(ctx, db, params)
    notify = _notify_cost(ctx, db, params)
    ratios = [
        round(q["rate_per_s"] / b["rate_per_s"], 2)
        for q, b in zip(
            (c for c in tput if c["variant"] == "ql3"),
            (c for c in tput if c["variant"] == "bare"),
            strict=True,
        )
        if b["rate_per_s"]
    ]
    listened = next((c for c in latency if c["listen"]), {})
    default_burst = next((c for c in burst if c["slots_per_worker"] == DEFAULT_SLOTS), {})
    best_burst = min((c["worst_s"] for c in burst), default=None)
    summary = ctx.emit(
        "worker_summary",
        {
            "started_ms": started_ms,
            "throughput_ratios": ratios,
            "throughput_ratio_worst": min(ratios, default=None),
            "throughput_ratio_median": statistics.median(ratios) if ratios else None,
            "start_p99_ms": listened.get("p99_ms"),
            "burst_worst_s_default_slots": default_burst.get("worst_s"),
            "burst_worst_s_best_slots": best_burst,
            "rss_end_mb": rss["rss_end_mb"],
            "notify_ratio_median": notify["ratio_median"],
            "targets": TARGETS,
            "met": {
                "throughput": bool(ratios) and min(ratios) >= TARGETS["throughput_ratio"],
                "start_p99": listened.get("p99_ms") is not None
                and listened["p99_ms"] <= TARGETS["start_p99_ms"],
                "burst": default_burst.get("worst_s") is not None
                and default_burst["worst_s"] <= TARGETS["burst_last_finished_s"],
                "rss": rss["met"],
            },
        },
    )
    ctx.drop(db)
    return [*tput, *latency, *burst, rss, notify, summary]
