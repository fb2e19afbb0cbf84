"""The worker rows and tables of docs/BENCHMARKS.md (`python -m bench worker`, see `_worker`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._report_rows import pick, yes
from ._targets import WORKER

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["worker_summary_rows", "worker_tables"]


def worker_summary_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the summary rows (figure, measured, target, met) of the last worker run."""
    rows: list[tuple[str, str, str, str]] = []
    for summary in pick(results, "worker_summary")[-1:]:
        # Judged against today's targets, not the verdict stored in the line.
        targets = WORKER
        ratios = summary["throughput_ratios"]
        rows.append(
            (
                (
                    "Worker: no-op Python tasks/s, 4 workers / bare SKIP LOCKED take-finish loop "
                    "(worst; every pass)"
                ),
                f"{summary['throughput_ratio_worst']} ({', '.join(str(r) for r in ratios)})",
                f">= {targets['throughput_ratio']}",
                yes((summary["throughput_ratio_worst"] or 0) >= targets["throughput_ratio"]),
            )
        )
        rows.append(
            (
                "Worker: admission -> attempt start p99, 4 idle workers (LISTEN)",
                f"{summary['start_p99_ms']} ms",
                f"<= {targets['start_p99_ms']:.0f} ms",
                yes((summary["start_p99_ms"] or float("inf")) <= targets["start_p99_ms"]),
            )
        )
        burst = pick(results, "worker_burst")
        rows.extend(
            (
                (
                    "Worker: 1,000 `true` at one instant, 2 workers x "
                    f"{c['slots_per_worker']} slots: last finished (worst; median; passes)"
                ),
                (
                    f"{c['worst_s']} s ({c['median_s']} s; "
                    f"{', '.join(str(v) for v in c['last_finished_s_passes'])})"
                ),
                f"<= {targets['burst_last_finished_s']} s",
                yes(c["worst_s"] <= targets["burst_last_finished_s"]),
            )
            for c in burst
        )
        rows.extend(
            (
                (
                    f"Worker: RSS after {rss['run_s'] / 60:.0f} min of steady work "
                    f"({rss['rate_per_s']} tasks/s)"
                ),
                f"{rss['rss_end_mb']} MB (peak {rss['rss_peak_mb']} MB)",
                f"<= {targets['rss_mb']:.0f} MB",
                yes(rss["rss_end_mb"] <= targets["rss_mb"]),
            )
            for rss in pick(results, "worker_rss")[-1:]
        )
        rows.extend(
            (
                (
                    "Admitting transactions/s with / without the `ql3_attempt_queued` trigger "
                    f"({c['connections']} connections, 1 Run each; median; passes)"
                ),
                f"{c['ratio_median']} ({', '.join(str(r) for r in c['ratio_passes'])})",
                "reported",
                "-",
            )
            for c in pick(results, "worker_notify_cost")[-1:]
        )
    return rows


def worker_tables(
    results: Sequence[dict[str, Any]],
    table: Callable[[Sequence[str], Sequence[Sequence[object]]], list[str]],
) -> list[str]:
    """Render the worker's detail tables, when the results hold them."""
    tput = pick(results, "worker_throughput")
    if not tput:
        return []
    out = ["## 8. Worker: execution", ""]
    out += table(
        ["pass", "variant", "workers", "backlog", "succeeded", "other ends", "span ms", "per s"],
        [
            (
                c["pass"],
                c["variant"],
                c["workers"],
                c["backlog"],
                c["succeeded"],
                c["other_ends"],
                c["span_ms"],
                c["rate_per_s"],
            )
            for c in tput
        ],
    )
    out += table(
        ["wake-up", "poll interval ms", "runs", "start p50 ms", "p99 ms", "max ms"],
        [
            (
                "LISTEN + polling" if c["listen"] else "polling only",
                c["poll_interval_ms"],
                c["runs"],
                c["p50_ms"],
                c["p99_ms"],
                c["max_ms"],
            )
            for c in pick(results, "worker_start_latency")
        ],
    )
    out += table(
        ["commands", "workers x slots", "last finished s (each pass)", "worst s", "median s"],
        [
            (
                c["commands"],
                f"{c['workers']} x {c['slots_per_worker']}",
                ", ".join(str(v) for v in c["last_finished_s_passes"]),
                c["worst_s"],
                c["median_s"],
            )
            for c in pick(results, "worker_burst")
        ],
    )
    out += table(
        ["run s", "tasks/s", "executed", "RSS MB at each minute", "RSS end MB", "peak MB"],
        [
            (
                c["run_s"],
                c["rate_per_s"],
                c["executed"],
                ", ".join(str(v) for v in c["rss_per_minute_mb"]),
                c["rss_end_mb"],
                c["rss_peak_mb"],
            )
            for c in pick(results, "worker_rss")
        ],
    )
    out += table(
        ["connections", "transactions/pass", "with trigger /s", "without /s", "ratio (each pass)"],
        [
            (
                c["connections"],
                c["transactions_per_pass"],
                ", ".join(str(v) for v in c["with_trigger_per_s"]),
                ", ".join(str(v) for v in c["without_trigger_per_s"]),
                ", ".join(str(v) for v in c["ratio_passes"]),
            )
            for c in pick(results, "worker_notify_cost")
        ],
    )
    return out
