"""Benchmark 4: RSS of one `ql3 run` replica with 100 000 schedules over 10 minutes.

The burst's template (100 000 schedules `* * * * *`, `catch_up`) is cloned and every cursor set
to the next minute boundary: each minute all 100 000 fall due at once, so every schedule is
claimed, decided and committed every minute and every cache the replica has (expression memo,
prepared statements, log records) is as full as this load makes it. One replica runs for RUN_S
seconds; every second the harness reads its `VmHWM`/`VmRSS` from /proc/PID/status and counts the
backends its login user holds in `pg_stat_activity` (only this replica runs as that user). The
RSS at the end of each minute is kept, so growth over time shows. Admissions are counted from the
database.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._burst import BURST_CRON, PERIOD_MS
from ._common import db_now_ms
from ._meters import login_user, memory_kb
from ._replicas import ql3_replicas
from ._sql import connect, load_sql
from ._targets import REPLICA_RSS_MB

if TYPE_CHECKING:
    from ._common import BenchContext

__all__ = ["run_footprint"]

TARGET_RSS_MB = REPLICA_RSS_MB
OWNER = "foot-r1"


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    if quick:
        return {"schedules": 2_000, "run_s": 20.0}
    return {"schedules": 100_000, "run_s": 600.0}


def run_footprint(ctx: BenchContext) -> list[dict[str, Any]]:
    """Run one replica over the schedules, sample memory and connections, emit one line."""
    params = _params(ctx.quick)
    template = ctx.shared_schedules("burst", BURST_CRON, params["schedules"])
    db = ctx.database("foot", template=template.name)
    log_dir = ctx.work_dir / db.name
    log_dir.mkdir(parents=True, exist_ok=True)
    user = login_user(db.dsn("runtime"))
    peak_kb = last_kb = 0
    connections_max = 0
    names: set[str] = set()
    per_minute_mb: list[float] = []
    try:
        with connect(db.superuser_dsn) as su:
            now = db_now_ms(su)
            su.execute(load_sql("set_cursor_at"), {"at_ms": (now // PERIOD_MS + 1) * PERIOD_MS})
            su.execute(load_sql("analyze"))
            with ql3_replicas(db.dsn("runtime"), [OWNER], log_dir) as replica:
                pid = replica.pids[0]
                started = time.monotonic()
                deadline = started + params["run_s"]
                next_mark = started + 60.0
                while time.monotonic() < deadline and replica.alive():
                    status = memory_kb(pid)
                    peak_kb = max(peak_kb, status.get("VmHWM", 0))
                    last_kb = status.get("VmRSS", 0)
                    if time.monotonic() >= next_mark:
                        per_minute_mb.append(round(last_kb / 1024, 1))
                        next_mark += 60.0
                    row = su.execute(load_sql("connections"), {"user": user}).fetchone() or {}
                    connections_max = max(connections_max, int(row.get("connections", 0)))
                    names.update(n for n in row.get("application_names", []) if n)
                    time.sleep(1.0)
                alive = replica.alive()
                exit_codes = replica.stop()
            history = su.execute(load_sql("history_check")).fetchone() or {}
            ctx.refresh_machine(su)
    finally:
        ctx.drop(db)
    if not alive:
        msg = f"the replica died during the footprint run:\n{replica.tail(OWNER)}"
        raise RuntimeError(msg)
    return [
        ctx.emit(
            "footprint",
            {
                "schedules": params["schedules"],
                "replicas": 1,
                "run_s": params["run_s"],
                "rss_peak_mb": round(peak_kb / 1024, 1),
                "rss_last_mb": round(last_kb / 1024, 1),
                "rss_per_minute_mb": per_minute_mb,
                "connections_held_max": connections_max,
                "application_names": sorted(names),
                "admitted": int(history.get("runs", 0)),
                "duplicates": int(history.get("duplicates", 0)),
                "target_rss_mb": TARGET_RSS_MB,
                "met": {"rss": peak_kb / 1024 <= TARGET_RSS_MB},
                "exit_codes": exit_codes,
            },
        )
    ]
