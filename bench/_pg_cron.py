"""pg_cron side by side: the same 1,000 jobs due at the top of each minute, pg_cron then QL3.

pg_cron (Debian's `postgresql-15-cron`, 1.4: minute granularity) runs on its own throwaway
cluster, started like the benchmark cluster (`_common.start_cluster`: durable, the same
settings) with `shared_preload_libraries` adding `pg_cron` and `cron.database_name` set; every
other cron.* setting is pg_cron's default (libpq mode, `cron.max_running_jobs` 32), and all of
them are read back from the server into the JSON line. In libpq mode pg_cron logs in to its own
server over TCP as the job's owner, so the server's environment names a passfile holding the
superuser's password (a `.pgpass` is how a Debian install does it).

pg_cron side: JOBS jobs `* * * * *`, each `INSERT`ing one row stamped `clock_timestamp()`.
Measured minutes start at the first minute boundary at least LEAD_S after the jobs exist (none
of them runs in an unmeasured minute before), for MINUTES minutes; then the jobs are removed.
Lateness of each job's start against its minute: its row's stamp, and pg_cron's own record
(`cron.job_run_details.start_time`, and `end_time`). Jobs that did not run in a minute count as
not run. The QL3 side (`_pg_cron_ql3`) runs on the same cluster, the same minutes' shape.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ql3_testkit import ThrowawayCluster

from ._common import CLUSTER_SETTINGS, db_now_ms, wait_until
from ._meters import WalMeter, machine_facts
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import psycopg

    from ._common import BenchContext

__all__ = ["CRON_DATABASE", "MINUTE_MS", "CronCluster", "first_minute", "run_pg_cron"]

JOBS = 1_000
MINUTE_MS = 60_000
LEAD_S = 10.0  # jobs (or schedules) exist, and replicas run, this long before the first minute
SETTLE_S = 55.0  # a measured minute's last job has this long before the harness stops waiting
CRON_DATABASE = "postgres"
PASSFILE = "cron.pgpass"
COMMAND = "INSERT INTO public.pg_cron_hits (job, at) VALUES (<job>, clock_timestamp())"


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    return {"jobs": JOBS, "minutes": 1 if quick else 3}


def _cron_bin_dir() -> Path:
    """Find the server whose lib folder holds pg_cron (Debian: /usr/lib/postgresql/15)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/lib/pg_cron.so"))
    if not found:
        msg = (
            "pg_cron is not installed: `apt-get install postgresql-15-cron` (scripts/setup.sh "
            "installs it as root)"
        )
        raise SystemExit(msg)
    return found[-1].parent.parent / "bin"


class CronCluster(ThrowawayCluster):
    """A benchmark cluster with pg_cron preloaded, able to log in to itself (libpq mode).

    pg_cron's launcher opens a libpq connection to `cron.host` for every job run; the server
    authenticates it like any client (SCRAM), so the postmaster's environment names a passfile
    (mode 0600, owned by the server's OS user) with the superuser's password.
    """

    def _prepare_folder(self) -> None:
        super()._prepare_folder()
        passfile = self.base_dir / PASSFILE
        passfile.write_text(f"*:*:*:{self.superuser}:{self.superuser_password}\n", "utf-8")
        passfile.chmod(0o600)
        if os.geteuid() == 0:
            import pwd  # noqa: PLC0415 - POSIX only, needed only when root hands the file over

            entry = pwd.getpwnam(self.os_user)
            os.chown(passfile, entry.pw_uid, entry.pw_gid)

    def _server_env(self) -> dict[str, str]:
        env = super()._server_env()
        env["PGPASSFILE"] = str(self.base_dir / PASSFILE)
        return env


def cron_settings() -> Mapping[str, str]:
    """Return the benchmark cluster's settings plus pg_cron preloaded and its database named."""
    preload = ",".join(
        filter(None, [CLUSTER_SETTINGS.get("shared_preload_libraries", ""), "pg_cron"])
    )
    return {
        **CLUSTER_SETTINGS,
        "shared_preload_libraries": preload,
        "cron.database_name": CRON_DATABASE,
    }


def first_minute(now_ms: int) -> int:
    """Return the first minute boundary at least LEAD_S after `now_ms` (database time)."""
    boundary = (now_ms // MINUTE_MS + 1) * MINUTE_MS
    return boundary if boundary - now_ms >= LEAD_S * 1000 else boundary + MINUTE_MS


def _sleep_until(su: psycopg.Connection[dict[str, Any]], at_ms: int) -> None:
    """Sleep (monotonic) for the span the database clock still has to cover to reach `at_ms`."""
    time.sleep(max(0.0, (at_ms - db_now_ms(su)) / 1000))


def _start_clear_of_a_minute(su: psycopg.Connection[dict[str, Any]]) -> None:
    """Wait past the next boundary if it is under LEAD_S away: no job may run before m0."""
    now = db_now_ms(su)
    boundary = (now // MINUTE_MS + 1) * MINUTE_MS
    if boundary - now < LEAD_S * 1000:
        _sleep_until(su, boundary + 500)


def _rows(
    su: psycopg.Connection[dict[str, Any]], name: str, window: dict[str, int]
) -> Iterator[dict[str, Any]]:
    """Rows of a per-minute verdict statement, the overall row (minute NULL) last."""
    return (dict(row) for row in su.execute(load_sql(name), window))


def _pg_cron_side(
    ctx: BenchContext, su: psycopg.Connection[dict[str, Any]], params: dict[str, Any]
) -> dict[str, Any]:
    jobs, minutes = params["jobs"], params["minutes"]
    su.execute(load_sql("pg_cron_hits_create"))
    _start_clear_of_a_minute(su)
    su.execute(load_sql("pg_cron_schedule"), {"jobs": jobs})
    m0 = first_minute(db_now_ms(su))
    last = m0 + (minutes - 1) * MINUTE_MS
    wal = WalMeter(su)
    _sleep_until(su, m0 - 1000)
    wal.start()
    _sleep_until(su, last)

    def done() -> bool:
        row = su.execute(load_sql("pg_cron_progress"), {"minute_ms": last}).fetchone() or {}
        return int(row.get("ran") or 0) >= jobs and int(row.get("unfinished") or 0) == 0

    settled = wait_until(done, timeout_s=SETTLE_S, interval_s=0.5)
    unscheduled = su.execute(load_sql("pg_cron_unschedule")).fetchone() or {}
    disk = wal.stop(jobs * minutes, ctx.disk.get("flushes_per_s"))
    wait_until(
        lambda: (
            int(
                (
                    su.execute(load_sql("pg_cron_progress"), {"minute_ms": last}).fetchone() or {}
                ).get("unfinished", 0)
            )
            == 0
        ),
        timeout_s=30,
    )
    window = {"m0_ms": m0, "minutes": minutes}
    hits = list(_rows(su, "pg_cron_hits_lateness", window))
    details = list(_rows(su, "pg_cron_details_lateness", window))
    failures = [dict(row) for row in su.execute(load_sql("pg_cron_failures"))]
    return {
        "m0_ms": m0,
        "settled": settled,
        "unscheduled": int(unscheduled.get("unscheduled") or 0),
        "hits": _with_not_run(hits, jobs, m0, minutes),
        "details": details,
        "failures": failures,
        **disk,
    }


def _with_not_run(
    rows: list[dict[str, Any]], jobs: int, m0: int, minutes: int
) -> list[dict[str, Any]]:
    """One row per measured minute (a minute nothing ran in still shows), then the overall."""
    by_minute = {row["minute_ms"]: row for row in rows if row["minute_ms"] is not None}
    overall = next((row for row in rows if row["minute_ms"] is None), {"ran": 0})
    out = []
    for index in range(minutes):
        minute = m0 + index * MINUTE_MS
        row = by_minute.get(minute, {"minute_ms": minute, "ran": 0})
        out.append({**row, "not_run": jobs - int(row["ran"])})
    out.append({**overall, "minute_ms": None, "not_run": jobs * minutes - int(overall["ran"])})
    return out


def run_pg_cron(ctx: BenchContext) -> list[dict[str, Any]]:
    """Run pg_cron's minutes, then QL3's on the same cluster; one JSON line each, a summary."""
    from ._pg_cron_ql3 import ql3_side  # noqa: PLC0415 - the QL3 half lives beside this one

    params = _params(ctx.quick)
    saved_machine = ctx.machine
    cluster = CronCluster(
        durable=ctx.cluster.durable,
        settings=cron_settings(),
        bin_dir=_cron_bin_dir(),
        name="ql3cron",
    )
    try:
        cluster.start()
        with connect(cluster.dsn(CRON_DATABASE)) as su:
            su.execute(load_sql("pg_cron_install"))
            version = (su.execute(load_sql("pg_cron_version")).fetchone() or {}).get("version")
            settings = {
                row["name"]: row["setting"] for row in su.execute(load_sql("pg_cron_settings"))
            }
            ctx.machine = machine_facts(su)
            pg_cron = _pg_cron_side(ctx, su, params)
            ctx.machine = machine_facts(su)
        line = ctx.emit(
            "pg_cron",
            {
                "jobs": params["jobs"],
                "minutes": params["minutes"],
                "cron": "* * * * *",
                "command": COMMAND,
                "pg_cron_version": version,
                "cron_settings": settings,
                **pg_cron,
            },
        )
        ql3 = ql3_side(ctx, cluster, params)
        summary = _summary(ctx, line, ql3)
    finally:
        cluster.stop()
        ctx.machine = saved_machine
    return [line, ql3, summary]


def _summary(ctx: BenchContext, pg_cron: dict[str, Any], ql3: dict[str, Any]) -> dict[str, Any]:
    """Both sides' overall figures side by side (the last row of each verdict)."""
    hits, details, verdict = pg_cron["hits"][-1], pg_cron["details"][-1], ql3["verdict"][-1]
    return ctx.emit(
        "pg_cron_summary",
        {
            "jobs": pg_cron["jobs"],
            "minutes": pg_cron["minutes"],
            "pg_cron": {
                "not_run": hits.get("not_run"),
                "start_p50_ms": hits.get("p50_ms"),
                "start_p99_ms": hits.get("p99_ms"),
                "start_max_ms": hits.get("max_ms"),
                "details_start_p99_ms": details.get("start_p99_ms"),
                "details_end_p99_ms": details.get("end_p99_ms"),
                "details_end_max_ms": details.get("end_max_ms"),
                "failed": details.get("failed"),
            },
            "ql3": {
                "replicas": ql3["replicas"],
                "workers": ql3["workers"],
                "not_admitted": ql3["not_admitted"],
                "duplicates": verdict.get("duplicates"),
                "admit_p50_ms": verdict.get("admit_p50_ms"),
                "admit_p99_ms": verdict.get("admit_p99_ms"),
                "admit_max_ms": verdict.get("admit_max_ms"),
                "not_started": ql3["not_started"],
                "start_p50_ms": verdict.get("start_p50_ms"),
                "start_p99_ms": verdict.get("start_p99_ms"),
                "start_max_ms": verdict.get("start_max_ms"),
                "end_p99_ms": verdict.get("end_p99_ms"),
            },
        },
    )
