"""`python -m bench`: run the QL3 benchmarks and write docs/BENCHMARKS.md.

uv run --group bench python -m bench all            # every benchmark, ~60 min on 2 cores
uv run --group bench python -m bench all --quick    # smoke run, report under .tmp/bench/
uv run --group bench python -m bench lateness       # one part (no report unless --report)
uv run --group bench python -m bench report FILE    # re-render the report from JSON lines
uv run --group bench python -m bench verify --sizes 100x100000,5x86400   # verify at scale
uv run --group bench python -m bench prune          # retention: 1 M Runs to 90 k, 24 h hourly
uv run --group bench python -m bench prune --sizes 10x100000,10x300000 --hours 0   # scale only
uv run --group bench python -m bench profile        # py-spy on a replica under a burst, EXPLAINs
uv run --group bench python -m bench pg-cron        # pg_cron and QL3, 1,000 jobs a minute, 3 min
uv run --group bench python -m bench ceiling        # commit ceiling of one primary, QL3 per commit
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._common import BenchContext

PARTS = (
    "throughput",
    "burst",
    "lateness",
    "claim-scale",
    "footprint",
    "verify",
    "prune",
    "worker",
    "profile",
    "pg-cron",
    "ceiling",
)


# Parts that take nothing but the context: the module (imported lazily, so that
# `baseline-worker` starts without loading the whole harness) and its entry point.
SIMPLE_PARTS = {
    "throughput": ("._throughput", "run_throughput"),
    "burst": ("._burst", "run_burst"),
    "lateness": ("._lateness", "run_lateness"),
    "claim-scale": ("._claim_scale", "run_claim_scale"),
    "footprint": ("._footprint", "run_footprint"),
    "worker": ("._worker", "run_worker"),
    "profile": ("._profile", "run_profile"),
    "pg-cron": ("._pg_cron", "run_pg_cron"),
    "ceiling": ("._ceiling", "run_ceiling"),
}


def _runner(part: str, args: argparse.Namespace) -> Callable[[BenchContext], list[dict[str, Any]]]:
    if part == "verify":
        from ._verify import parse_sizes, run_verify  # noqa: PLC0415

        sizes = parse_sizes(args.sizes) if getattr(args, "sizes", None) else None
        return lambda ctx: run_verify(ctx, sizes)
    if part == "prune":
        from ._prune import run_prune  # noqa: PLC0415
        from ._verify import parse_sizes  # noqa: PLC0415

        scale = getattr(args, "sizes", None)
        pruned = None if scale is None else (parse_sizes(scale) if scale else [])
        hours, autovacuum = getattr(args, "hours", None), getattr(args, "autovacuum", False)
        return lambda ctx: run_prune(ctx, pruned, hours, autovacuum=autovacuum)
    module, function = SIMPLE_PARTS[part]
    runner: Callable[[BenchContext], list[dict[str, Any]]] = getattr(
        importlib.import_module(module, __package__), function
    )
    return runner


def _run(parts: tuple[str, ...], args: argparse.Namespace) -> int:
    from ._common import BenchContext, db_now_ms, start_cluster  # noqa: PLC0415
    from ._meters import disk_flush_rate  # noqa: PLC0415
    from ._replicas import new_work_dir  # noqa: PLC0415
    from ._sql import connect  # noqa: PLC0415

    out_dir = Path(".tmp/bench")
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = (
        Path(args.jsonl)
        if args.jsonl
        else out_dir / ("quick.jsonl" if args.quick else "latest.jsonl")
    )
    jsonl.write_text("", encoding="utf-8")
    started = time.monotonic()
    with start_cluster(durable=not args.non_durable) as cluster:
        ctx = BenchContext(cluster=cluster, quick=args.quick, jsonl=jsonl, work_dir=new_work_dir())
        with connect(cluster.dsn()) as conn:
            started_ms = db_now_ms(conn)
            ctx.refresh_machine(conn)
        ctx.emit("run", {"started_ms": started_ms, "quick": args.quick, "parts": list(parts)})
        ctx.disk = disk_flush_rate(cluster)
        ctx.emit("disk", ctx.disk)
        for part in parts:
            part_started = time.monotonic()
            _runner(part, args)(ctx)
            print(f"# {part}: {time.monotonic() - part_started:.1f} s", file=sys.stderr, flush=True)
        # The shared disk's flush rate moves with other processes' I/O: measure it again at the
        # end; the report uses the higher reading as the limit.
        ctx.emit("disk", disk_flush_rate(cluster))
    elapsed = time.monotonic() - started
    ctx.emit("run_end", {"elapsed_s": round(elapsed, 1)})
    print(f"# total: {elapsed:.1f} s; JSON lines in {jsonl}", file=sys.stderr, flush=True)
    if args.report or (len(parts) == len(PARTS) and not args.quick):
        from ._report import write_report  # noqa: PLC0415

        target = Path(args.docs) / "BENCHMARKS.md" if not args.quick else out_dir / "BENCHMARKS.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        write_report(ctx.results, target, started_ms=started_ms, elapsed_s=elapsed)
        print(f"# report: {target}", file=sys.stderr, flush=True)
    return 0


def _report(args: argparse.Namespace) -> int:
    from ._report import write_report  # noqa: PLC0415

    lines = Path(args.file).read_text(encoding="utf-8").splitlines()
    results = [json.loads(line) for line in lines if line.strip()]
    run: dict[str, Any] = next((r for r in results if r.get("measurement") == "run"), {})
    end: dict[str, Any] = next((r for r in results if r.get("measurement") == "run_end"), {})
    started_ms = args.started_ms if args.started_ms is not None else run.get("started_ms", 0)
    elapsed_s = args.elapsed_s if args.elapsed_s is not None else end.get("elapsed_s", 0.0)
    target = Path(args.docs) / "BENCHMARKS.md"
    write_report(results, target, started_ms=started_ms, elapsed_s=elapsed_s)
    print(f"# report: {target}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("all", *PARTS):
        part = sub.add_parser(name, help=f"run {name}")
        part.add_argument("--quick", action="store_true", help="smaller, shorter smoke run")
        part.add_argument("--jsonl", help="where to write the JSON lines (default .tmp/bench/)")
        part.add_argument("--docs", default="docs", help="folder for BENCHMARKS.md + PNG")
        part.add_argument("--report", action="store_true", help="write the report anyway")
        part.add_argument(
            "--non-durable",
            action="store_true",
            help="fsync, full_page_writes, synchronous_commit off (labelled in every line)",
        )
        if name in {"all", "verify", "prune"}:
            part.add_argument(
                "--sizes",
                help="verify, prune: SCHEDULESxOCCURRENCES,... (verify default"
                " 100x100000,5x86400; prune default 10x100000, '' skips the scale case)",
            )
        if name == "prune":
            part.add_argument(
                "--hours", type=int, help="simulated hours of hourly pruning (default 24, 0 skips)"
            )
            part.add_argument(
                "--autovacuum",
                action="store_true",
                help="hourly pruning: leave the vacuuming to autovacuum (no VACUUM by the bench)",
            )
    report = sub.add_parser("report", help="render the report from a JSON-lines file")
    report.add_argument("file")
    report.add_argument("--docs", default="docs")
    report.add_argument("--started-ms", type=int, help="DB time of the run (default: from FILE)")
    report.add_argument("--elapsed-s", type=float, help="duration (default: from FILE)")
    worker = sub.add_parser("baseline-worker", help="(internal) one bare-SQL baseline worker")
    worker.add_argument("--dsn", required=True)
    worker.add_argument("--owner-id", required=True)
    worker.add_argument("--max-seconds", type=float, default=600.0)
    worker.add_argument("--period-ms", type=int, default=1000, help="the crons' fixed period")
    child = sub.add_parser("verify-child", help="(internal) one measured verify_history call")
    child.add_argument("--dsn", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run it."""
    args = _parser().parse_args(argv)
    if args.command == "baseline-worker":
        from ._baseline import run_baseline_worker  # noqa: PLC0415

        run_baseline_worker(args.dsn, args.owner_id, args.max_seconds, args.period_ms)
        return 0
    if args.command == "verify-child":
        from ._verify import run_verify_child  # noqa: PLC0415

        run_verify_child(args.dsn)
        return 0
    if args.command == "report":
        return _report(args)
    parts = PARTS if args.command == "all" else (args.command,)
    return _run(parts, args)


if __name__ == "__main__":
    sys.exit(main())
