"""Where one primary ends: the durable commit ceiling of this disk, and QL3's admissions per commit.

Two measurements on the benchmark cluster, both against `pg_stat_wal` (`_meters.WalMeter`):

1. A bare loop of single-row durable commits (`pgbench -f sql/ceiling_commit.sql`, the server's
   own client in C, so the client's CPU is not the limit) at rising concurrency (1, 2, 4, ...):
   commits per second (rows written, counted in the database, over the monotonic span), WAL
   flushes per second and commits per flush (group commit), until two levels in a row gain
   under GAIN. The highest rate is the commit ceiling of this disk and these two cores.
2. QL3 catch-up throughput at R = 1, 2, 4 (`_throughput`'s shape: 2 000 schedules
   `* * * * * *` ten minutes behind), then the steady state at R = 2 (the same schedules due
   once each second, so the rate is the load's and the figures of interest are per admission):
   admissions per second, fenced commits per second (distinct claim token and commit
   observation of the Runs), admissions per commit, WAL flushes and bytes per admission, and CPU
   per admission (replicas and their backends).

The summary line does the arithmetic: admissions per second one primary can carry when the
commits are what bounds it (commit ceiling x admissions per commit), and when CPU is.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import DEFAULTS_LABEL, db_now_ms, wait_until
from ._meters import CpuMeter, WalMeter, login_user
from ._replicas import ql3_replicas
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["run_ceiling"]

BACKLOG_MS = 600_000
# The two load shapes: a backlog (a decision admits up to the cycle budget, 256, per schedule) and
# the steady state (every schedule due once each second: one occurrence per claimed schedule,
# at most the claim batch, 128, per commit).
CATCH_UP = "catch-up: cursors 600 s behind"
STEADY = "steady: every schedule due once each second"
STEADY_REPLICAS = 2
GAIN = 1.05  # a level must add 5 % commits/s over the best so far to count as rising
RAMP_S = 1.5  # pgbench's connections are made before the window opens
STATS_SETTLE_S = 1.0  # exited backends' statistics reach pg_stat_wal
MAX_CONNECTIONS = 32
_EVER = {
    "since_ms": 0,
    "until_ms": 2**62,
}  # every Run of a database  # the cluster allows 60; the harness and its meters need a few


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {
            "levels": (1, 4, 16),
            "commit_s": 2,
            "replicas": (1, 2),
            "warmup_s": 1.5,
            "window_s": 3.0,
            "schedules": 1000,
        }
    return {
        "levels": (1, 2, 4, 8, 16, 32),
        "commit_s": 6,
        "replicas": (1, 2, 4),
        "warmup_s": 3.0,
        "window_s": 6.0,
        "schedules": 2000,
    }


def _rows(su: Any) -> int:  # noqa: ANN401 - psycopg connection
    return int((su.execute(load_sql("ceiling_rows")).fetchone() or {}).get("n") or 0)


def _commit_level(ctx: BenchContext, db: Ql3Database, clients: int, seconds: int) -> dict[str, Any]:
    """Run pgbench's single-row commits with `clients` connections; measure `seconds` of it.

    The window opens RAMP_S after pgbench starts (its connections are made: SCRAM logins cost
    CPU that no commit does) and closes before it stops; commits are the rows the database
    gained in the window, over the window's monotonic length.
    """
    script = resources.files("bench").joinpath("sql", "ceiling_commit.sql")
    pgbench = ctx.cluster.bin_dir / "pgbench"
    if not pgbench.exists():
        pgbench = Path(shutil.which("pgbench") or pgbench)
    command = [
        str(pgbench),
        "--no-vacuum",
        "--protocol=prepared",
        f"--file={script}",
        f"--client={clients}",
        f"--jobs={min(clients, os.cpu_count() or 1)}",
        f"--time={math.ceil(seconds + 2 * RAMP_S)}",
        db.superuser_dsn,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    with connect(db.superuser_dsn) as su:
        whole = WalMeter(su)
        whole.start()
        first = _rows(su)
        bench = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            time.sleep(RAMP_S)
            before = _rows(su)
            started = time.monotonic()
            time.sleep(seconds)
            commits = _rows(su) - before
            span_s = time.monotonic() - started
            _, stderr = bench.communicate(timeout=seconds + 60)
        finally:
            if bench.poll() is None:
                bench.kill()
                bench.wait()
        # A backend reports its WAL counters at most once a second, and at its exit: read them
        # once pgbench's backends are gone, over its whole run, against every row it wrote.
        time.sleep(STATS_SETTLE_S)
        total = _rows(su) - first
        disk = whole.stop(total, ctx.disk.get("flushes_per_s"))
    if bench.returncode != 0:
        msg = f"pgbench -c {clients} failed ({bench.returncode}): {stderr.strip()[-400:]}"
        raise RuntimeError(msg)
    wal_syncs = disk["wal_syncs"]
    per_flush = total / wal_syncs if wal_syncs else None
    rate = commits / span_s
    flushes_per_s = rate / per_flush if per_flush else None
    limit = ctx.disk.get("flushes_per_s")
    return ctx.emit(
        "ceiling_commits",
        {
            "clients": clients,
            "span_s": round(span_s, 2),
            "commits": commits,
            "commits_per_s": round(rate, 1),
            "run_commits": total,
            "run_wal_syncs": wal_syncs,
            "commits_per_flush": round(per_flush, 2) if per_flush else None,
            "wal_syncs_per_s": round(flushes_per_s, 1) if flushes_per_s else None,
            "flush_limit_share": round(flushes_per_s / limit, 3)
            if flushes_per_s and limit
            else None,
            "wal_kb_per_commit": disk["wal_kb_per_admission"],
            "tool": "pgbench --protocol=prepared, one INSERT per transaction",
        },
    )


def _commit_ceiling(ctx: BenchContext, params: dict[str, Any]) -> list[dict[str, Any]]:
    db = ctx.database("ceiling")
    cells: list[dict[str, Any]] = []
    try:
        with connect(db.superuser_dsn) as su:
            su.execute(load_sql("ceiling_create"))
        best, flat = 0.0, 0
        for clients in params["levels"]:
            cell = _commit_level(ctx, db, min(clients, MAX_CONNECTIONS), params["commit_s"])
            cells.append(cell)
            flat = flat + 1 if cell["commits_per_s"] < best * GAIN else 0
            best = max(best, cell["commits_per_s"])
            if flat >= 2:  # noqa: PLR2004 - two levels in a row without a gain: the plateau
                break
    finally:
        ctx.drop(db)
    return cells


def _ql3_cell(
    ctx: BenchContext, template: Ql3Database, replicas: int, params: dict[str, Any], shape: str
) -> dict[str, Any]:
    db = ctx.database("ceil", template=template.name)
    log_dir = ctx.work_dir / db.name
    log_dir.mkdir(parents=True, exist_ok=True)
    owners = [f"ceil-r{index}" for index in range(1, replicas + 1)]
    try:
        with connect(db.superuser_dsn) as su:
            if shape == CATCH_UP:
                su.execute(load_sql("set_backlog"), {"backlog_ms": BACKLOG_MS})
            else:
                su.execute(load_sql("set_cursor_next_second"))
            whole = WalMeter(su)
            whole.start()
            with ql3_replicas(db.dsn("runtime"), owners, log_dir) as workers:

                def admitted() -> bool:
                    row = su.execute(load_sql("run_count")).fetchone() or {}
                    return not workers.alive() or int(row.get("runs") or 0) > 0

                if not wait_until(admitted, timeout_s=60) or not workers.alive():
                    tails = "\n".join(f"--- {o}\n{workers.tail(o)}" for o in owners)
                    msg = f"replicas did not admit within 60 s (or died):\n{tails}"
                    raise RuntimeError(msg)
                time.sleep(params["warmup_s"])
                meter = CpuMeter(su, login_user(db.dsn("runtime")), workers.pids)
                meter.start()
                wal = WalMeter(su)
                wal.start()
                t0 = db_now_ms(su)
                time.sleep(params["window_s"])
                t1 = db_now_ms(su)
                window = {"since_ms": t0, "until_ms": t1}
                rounds = su.execute(load_sql("ceiling_rounds"), window).fetchone() or {}
                admissions = int(rounds.get("admissions") or 0)
                cpu = meter.stop(admissions)
                disk = wal.stop(admissions, ctx.disk.get("flushes_per_s"))
                backlog = su.execute(load_sql("backlog"), {"at_ms": t1}).fetchone() or {}
                workers.stop()
            # Exact flushes per admission: the replicas' backends have exited, so every WAL
            # counter they kept has reached pg_stat_wal (a live backend reports once a second).
            time.sleep(STATS_SETTLE_S)
            life = su.execute(load_sql("ceiling_rounds"), _EVER).fetchone() or {}
            run = whole.stop(int(life.get("admissions") or 0), ctx.disk.get("flushes_per_s"))
            ctx.refresh_machine(su)
    finally:
        ctx.drop(db)
    commits = int(rounds.get("commits") or 0)
    span_s = (t1 - t0) / 1000
    return ctx.emit(
        "ceiling_ql3",
        {
            "replicas": replicas,
            "schedules": params["schedules"],
            "shape": shape,
            "settings": DEFAULTS_LABEL,
            "window_ms": t1 - t0,
            "admissions": admissions,
            "admissions_per_s": round(admissions / span_s, 1),
            "fenced_commits": commits,
            "fenced_commits_per_s": round(commits / span_s, 1),
            "admissions_per_commit": round(admissions / commits, 1) if commits else None,
            "behind_at_end": int(backlog.get("behind") or 0),
            **cpu,
            **disk,
            "run_admissions": int(life.get("admissions") or 0),
            "run_fenced_commits": int(life.get("commits") or 0),
            "run_wal_syncs": run["wal_syncs"],
            "run_wal_syncs_per_admission": run["wal_syncs_per_admission"],
            "run_wal_kb_per_admission": run["wal_kb_per_admission"],
        },
    )


def run_ceiling(ctx: BenchContext) -> list[dict[str, Any]]:
    """Measure the commit ceiling, then QL3 at each R; emit the cells and the arithmetic."""
    params = _params(ctx.quick)
    commits = _commit_ceiling(ctx, params)
    template = ctx.schedules_database("ceil", ["* * * * * *"] * params["schedules"])
    try:
        ql3 = [_ql3_cell(ctx, template, r, params, CATCH_UP) for r in params["replicas"]]
        ql3.append(_ql3_cell(ctx, template, STEADY_REPLICAS, params, STEADY))
    finally:
        ctx.drop(template)
    return [*commits, *ql3, _summary(ctx, commits, ql3)]


def _summary(
    ctx: BenchContext, commits: list[dict[str, Any]], ql3: list[dict[str, Any]]
) -> dict[str, Any]:
    """Do the arithmetic: commit ceiling x admissions per commit, and the CPU bound beside it."""
    top = max(commits, key=lambda c: c["commits_per_s"])
    single = next((c for c in commits if c["clients"] == 1), commits[0])
    cores = os.cpu_count() or 1
    per_r = []
    for cell in ql3:
        per_commit = cell["admissions_per_commit"] or 0.0
        cpu_ms = (cell.get("worker_cpu_ms_per_admission") or 0.0) + (
            cell.get("backend_cpu_ms_per_admission") or 0.0
        )
        per_r.append(
            {
                "replicas": cell["replicas"],
                "shape": cell["shape"],
                "admissions_per_s": cell["admissions_per_s"],
                "admissions_per_commit": per_commit,
                "fenced_commits_per_s": cell["fenced_commits_per_s"],
                "commit_ceiling_share": round(
                    cell["fenced_commits_per_s"] / top["commits_per_s"], 4
                ),
                "wal_syncs_per_admission": cell.get("run_wal_syncs_per_admission"),
                "wal_bound_admissions_per_s": round(top["commits_per_s"] * per_commit),
                "cpu_ms_per_admission": round(cpu_ms, 4),
                "cpu_bound_admissions_per_s": round(cores * 1000 / cpu_ms) if cpu_ms else None,
            }
        )
    return ctx.emit(
        "ceiling_summary",
        {
            "commit_ceiling_per_s": top["commits_per_s"],
            "commit_ceiling_clients": top["clients"],
            "commit_ceiling_commits_per_flush": top["commits_per_flush"],
            "single_client_commits_per_s": single["commits_per_s"],
            "disk_flushes_per_s": ctx.disk.get("flushes_per_s"),
            "cores": cores,
            "ql3": per_r,
        },
    )
