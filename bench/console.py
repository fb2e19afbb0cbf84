"""Page time of the web console with 1 M Runs in the history (DESIGN §15).

    uv sync --frozen --all-packages --extra web --group bench  # once: the console's extra
    uv run --frozen python -m bench.console                    # 1 M Runs: 20, 1,000 schedules
    uv run --frozen python -m bench.console --schedules 1000   # one layout
    uv run --frozen python -m bench.console --runs 20000       # smoke

For each count in `--schedules` (a comma-separated list), a throwaway PostgreSQL (durable,
ql3_testkit) gets that many schedules firing every second and `--runs` Runs spread over them,
each with a finished attempt, written by one statement (`sql/console_seed_runs.sql`), then
VACUUMed and ANALYZEd (`sql/vacuum_console_history.sql`). The console is then served as
`ql3_observer` on loopback (uvicorn in a thread of this process, as `ql3 demo --web` serves it)
and each page (the schedules page's first and last page among them) is requested `--requests`
times in turn over HTTP; each request's time is measured with the monotonic clock (latency
only; no instant is read from this machine). One JSON line per page: p50, p99, max in ms. With
`--explain FILE`, the plans (EXPLAIN (ANALYZE, BUFFERS), as the observer) of the statements
behind the two costly pages are appended to FILE. The figures land in docs/BENCHMARKS.md by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from psycopg import sql
from ql3_cluster_control.web import ConsoleServer, ConsoleSettings
from ql3_cluster_postgres import ScheduleAdmin
from ql3_runtime_core import ScheduleDefinition
from ql3_testkit import ThrowawayCluster, prepare_ql3_database

from ._sql import connect, load_sql

PORT = 18_480
PER_PAGE = 50  # the console's schedules per page (ConsoleReader's default)
# The console statements whose plans `--explain` records, with the parameters the pages send.
_EXPLAINED: dict[str, dict[str, Any]] = {
    "console_schedules": {"schedule_id": None, "skip": 0, "batch_limit": 50, "lateness_runs": 100},
    "console_run_counts": {"schedule_id": 1, "window_runs": 1000},
    "console_run_total": {"schedule_id": 1},
    "console_runs": {"schedule_id": 1, "batch_limit": 50},
    "console_lateness": {"schedule_id": 1, "batch_limit": 200},
}


def _seed(dsn_admin: str, superuser_dsn: str, schedules: int, runs: int) -> int:
    with ScheduleAdmin(dsn_admin) as admin:
        for index in range(schedules):
            admin.add_schedule(f"bench-{index:04d}", ScheduleDefinition(cron="* * * * * *"))
    with connect(superuser_dsn) as conn:
        conn.execute(load_sql("console_seed_runs"), {"per_schedule": runs // schedules})
        conn.execute(load_sql("vacuum_console_history"))
        row = conn.execute(load_sql("count_runs")).fetchone()
    assert row is not None  # noqa: S101 - count(*) always answers
    return int(row["runs"])


def _time_page(url: str, requests: int) -> dict[str, float]:
    times: list[float] = []
    for _ in range(requests):
        start = time.monotonic()
        with urllib.request.urlopen(url, timeout=60) as answer:  # noqa: S310 - loopback
            answer.read()
            assert answer.status == 200  # noqa: S101, PLR2004
        times.append((time.monotonic() - start) * 1000)
    ordered = sorted(times)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def _explain(observer_dsn: str, schedules: int, out: Path) -> None:
    """Append the plans of the schedules page's and one schedule's statements to `out`."""
    package = resources.files("ql3_cluster_postgres").joinpath("sql")
    with connect(observer_dsn) as conn, out.open("a", encoding="utf-8") as handle:
        for name, params in _EXPLAINED.items():
            # A reviewed statement file of the package, run under EXPLAIN as the page sends it.
            text = package.joinpath(f"{name}.sql").read_text("utf-8")
            statement = sql.SQL("EXPLAIN (ANALYZE, BUFFERS) {}").format(sql.SQL(text))
            rows = conn.execute(statement, params).fetchall()
            handle.write(f"== {name} ({schedules} schedules) {json.dumps(params)}\n")
            handle.writelines(f"{row['QUERY PLAN']}\n" for row in rows)


def _measure(args: argparse.Namespace, schedules: int) -> list[dict[str, Any]]:
    """Seed `schedules` schedules and `args.runs` Runs in a fresh cluster; time every page."""
    lines: list[dict[str, Any]] = []
    with ThrowawayCluster(durable=True, name="ql3console") as cluster:
        db = prepare_ql3_database(cluster, "console")
        total = _seed(db.dsn("admin"), db.superuser_dsn, schedules, args.runs)
        if args.explain is not None:
            _explain(db.dsn("observer"), schedules, args.explain)
        settings = ConsoleSettings(dsn=db.dsn("observer"))
        server = ConsoleServer(settings, "127.0.0.1", PORT)
        server.start()
        try:
            last_page = -(-schedules // PER_PAGE)
            pages = {"schedules": "/"}
            if last_page > 1:
                pages[f"schedules page {last_page}"] = f"/?page={last_page}"
            pages |= {
                "schedule": "/schedules/1",
                "replicas": "/replicas",
                "workers": "/workers",
                "verify": "/verify",
            }
            for page, path in pages.items():
                _time_page(server.url + path, 3)  # warm the connection and the caches
                figures = _time_page(server.url + path, args.requests)
                lines.append(
                    {
                        "bench": "console",
                        "page": page,
                        "schedules": schedules,
                        "runs": total,
                        "requests": args.requests,
                    }
                    | figures
                )
        finally:
            server.stop()
    return lines


def main(argv: list[str] | None = None) -> int:
    """Seed, serve, measure; print one JSON line per page (and append them to `--out`)."""
    parser = argparse.ArgumentParser(prog="python -m bench.console")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--schedules", default="20,1000", help="comma-separated counts")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--explain", type=Path, default=None)
    args = parser.parse_args(argv)
    lines: list[dict[str, Any]] = []
    for schedules in (int(count) for count in args.schedules.split(",")):
        lines += _measure(args, schedules)
    for line in lines:
        print(json.dumps(line))
    if args.out is not None:
        with args.out.open("a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
