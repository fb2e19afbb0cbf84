"""The QL3 half of the pg_cron side by side: 1,000 schedules `* * * * *`, R=2, 2 workers.

On pg_cron's cluster (same server, same settings), a QL3 database gets JOBS schedules
`* * * * *` (`catch_up`) whose task is the command `true` (a no-op: what is measured is the
scheduling and the hand-over, not the work). Every cursor is set (superuser SQL,
`set_cursor_at.sql`) to the first minute boundary at least LEAD_S away, then 2 `ql3 run`
replicas and 2 `ql3 worker` processes start with default settings. For each measured minute:
admission lateness of each Run (`runs.created_at_ms - scheduled_for_ms`), and its first
attempt's start (`started_at_ms`: taken by a worker) and end, all written by the database.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ql3_cluster_control import WorkerSettings
from ql3_cluster_postgres import ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, TaskExecution
from ql3_testkit import drop_database, prepare_ql3_database

from ._common import DEFAULTS_LABEL, db_now_ms, wait_until
from ._meters import CpuMeter, WalMeter, login_user, machine_facts
from ._pg_cron import MINUTE_MS, SETTLE_S, first_minute
from ._replicas import ReplicaSet, ql3_executable, ql3_replicas
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

    from ._common import BenchContext

__all__ = ["ql3_side"]

REPLICAS = 2
WORKERS = 2
COMMAND = "true"
_WORKER_DEFAULTS = WorkerSettings.model_fields
WORKER_LABEL = (
    f"defaults (concurrency {_WORKER_DEFAULTS['concurrency'].default}, poll "
    f"{_WORKER_DEFAULTS['poll_interval_ms'].default} ms)"
)


def _workers(db: Ql3Database, log_dir: Any) -> ReplicaSet:  # noqa: ANN401 - a Path
    """`ql3 worker` processes as the worker_ingress login, JSON logs, default settings."""
    base = [ql3_executable(), "worker", "--dsn", db.dsn("worker_ingress"), "--log-format", "json"]
    owners = [f"pgcron-w{index}" for index in range(1, WORKERS + 1)]
    return ReplicaSet(
        commands={owner: [*base, "--worker-id", owner] for owner in owners}, log_dir=log_dir
    )


def _schedules(db: Ql3Database, count: int) -> None:
    definition = ScheduleDefinition(cron="* * * * *", misfire_policy=MisfirePolicy.CATCH_UP)
    specs = [
        ScheduleSpec(
            name=f"cron-{index:04d}",
            definition=definition,
            execution=TaskExecution(command=COMMAND),
        )
        for index in range(1, count + 1)
    ]
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.apply_schedules(specs)


def ql3_side(
    ctx: BenchContext, cluster: ThrowawayCluster, params: dict[str, Any]
) -> dict[str, Any]:
    """Measure QL3's minutes on `cluster`; emit and return its JSON line."""
    jobs, minutes = params["jobs"], params["minutes"]
    db = prepare_ql3_database(cluster, "pgcron_ql3")
    log_dir = ctx.work_dir / db.name
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        _schedules(db, jobs)
        with connect(db.superuser_dsn) as su:
            m0 = first_minute(db_now_ms(su))
            last = m0 + (minutes - 1) * MINUTE_MS
            su.execute(load_sql("set_cursor_at"), {"at_ms": m0})
            su.execute(load_sql("analyze"))
            replicas = ql3_replicas(
                db.dsn("runtime"), [f"pgcron-r{i}" for i in range(1, REPLICAS + 1)], log_dir
            )
            with replicas, _workers(db, log_dir) as workers:
                time.sleep(max(0.0, (m0 - db_now_ms(su)) / 1000 - 1.0))
                if not (replicas.alive() and workers.alive()):
                    tails = "\n".join(
                        f"--- {o}\n{group.tail(o)}"
                        for group in (replicas, workers)
                        for o in group.owners
                    )
                    msg = f"QL3 replicas or workers died before the first minute:\n{tails}"
                    raise RuntimeError(msg)
                user = login_user(db.dsn("runtime"))
                meter = CpuMeter(su, user, [*replicas.pids, *workers.pids])
                meter.start()
                wal = WalMeter(su)
                wal.start()
                time.sleep(max(0.0, (last - db_now_ms(su)) / 1000))

                def done() -> bool:
                    row = su.execute(load_sql("pg_cron_ql3_progress"), {"minute_ms": last})
                    found = row.fetchone() or {}
                    return bool(int(found.get("finished") or 0) >= jobs)

                settled = wait_until(done, timeout_s=SETTLE_S, interval_s=0.5)
                cpu = meter.stop(jobs * minutes)
                disk = wal.stop(jobs * minutes, ctx.disk.get("flushes_per_s"))
                exit_codes = [*workers.stop(), *replicas.stop()]
            window = {"m0_ms": m0, "minutes": minutes}
            verdict = [dict(row) for row in su.execute(load_sql("pg_cron_ql3_lateness"), window)]
            ctx.machine = machine_facts(su)
    finally:
        drop_database(cluster, db.name)
    overall = next((row for row in verdict if row["minute_ms"] is None), {})
    return ctx.emit(
        "pg_cron_ql3",
        {
            "schedules": jobs,
            "minutes": minutes,
            "cron": "* * * * *",
            "command": COMMAND,
            "replicas": REPLICAS,
            "workers": WORKERS,
            "settings": DEFAULTS_LABEL,
            "worker_settings": WORKER_LABEL,
            "m0_ms": m0,
            "settled": settled,
            "not_admitted": jobs * minutes - int(overall.get("admitted") or 0),
            "not_started": jobs * minutes - int(overall.get("started") or 0),
            "verdict": verdict,
            **cpu,
            **disk,
            "exit_codes": exit_codes,
        },
    )
