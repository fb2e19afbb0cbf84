"""Write docs/BENCHMARKS.md (figures vs targets) and docs/benchmarks.png from the JSON lines.

matplotlib comes from the `bench` dependency group and is imported only here, with the Agg
backend (no display). The report's date is the database's clock at the start of the run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from ._report_details import FLUSH_LIMIT, detail_tables, table
from ._report_pg_cron import pg_cron_rows, pg_cron_tables
from ._report_profile import profile_rows
from ._report_prune import prune_summary_rows
from ._report_rows import pick, summary_rows
from ._report_worker import worker_summary_rows, worker_tables
from ._targets import LATENESS_P99_MS

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["write_report"]

COMMAND = "uv run --group bench python -m bench all"


def _plot(results: Sequence[dict[str, Any]], target: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - only the report needs matplotlib (bench group)

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after choosing the backend

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    tput = pick(results, "throughput")
    labels = [f"{c['variant']}\nR={c['replicas']}" for c in tput]
    ax = axes[0][0]
    ax.bar(range(len(tput)), [c["rate_per_s"] for c in tput], color="tab:blue")
    ax.set_xticks(range(len(tput)), labels, fontsize=8)
    ax.set_ylabel("admissions / s (DB time)")
    ax.set_title("1. Throughput, backlog drain")
    ax = axes[0][1]
    summaries = pick(results, "lateness_summary")
    late = summaries[-1]["cells"] if summaries else pick(results, "lateness")
    late = [c for c in late if c.get("variant", "ql3") == "ql3"]
    for size in sorted({c["schedules"] for c in late}):
        cells = [c for c in late if c["schedules"] == size]
        ax.plot(
            [c["replicas"] for c in cells],
            [c["p99_ms"] for c in cells],
            "o-",
            label=f"S={size} p99",
        )
        ax.plot(
            [c["replicas"] for c in cells],
            [c["p50_ms"] for c in cells],
            "x--",
            label=f"S={size} p50",
        )
    for size, limit in LATENESS_P99_MS.items():
        ax.axhline(limit, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"target S={size}", (1, limit), fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("replicas")
    ax.set_ylabel("lateness ms")
    ax.set_title("2. Lateness (every-second schedules)")
    ax.legend(fontsize=7)
    ax = axes[1][0]
    claim = pick(results, "claim_scale")
    ax.plot([c["schedules"] for c in claim], [c["p50_ms"] for c in claim], "o-", label="p50")
    ax.plot([c["schedules"] for c in claim], [c["p99_ms"] for c in claim], "x--", label="p99")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("schedules (16 due)")
    ax.set_ylabel("claim ms")
    ax.set_title("3. Claim latency vs idle schedules")
    ax.legend(fontsize=7)
    ax = axes[1][1]
    foot = pick(results, "footprint")
    ax.bar(
        [f"{c['schedules']} schedules" for c in foot],
        [c["rss_peak_mb"] for c in foot],
        color="tab:green",
    )
    ax.axhline(80, color="grey", linestyle=":", linewidth=1)
    ax.set_ylabel("peak RSS MB (VmHWM)")
    ax.set_title("4. Footprint of one replica")
    fig.tight_layout()
    fig.savefig(target, dpi=90)
    plt.close(fig)


def _resource(name: str) -> list[str]:
    """Return a hand-written Markdown section shipped in `bench/` (analysis, method), if any."""
    source = resources.files("bench").joinpath(name)
    if not source.is_file():
        return []
    return [source.read_text(encoding="utf-8").rstrip(), ""]


def _durability(machine: dict[str, Any], results: Sequence[dict[str, Any]]) -> str:
    settings = machine.get("pg_settings", {})
    shown = ", ".join(f"`{k}={v}`" for k, v in settings.items())
    readings = pick(results, "disk")
    disk = max(readings, key=lambda r: r.get("flushes_per_s") or 0, default={})
    flush = (
        f" The disk's flush rate, measured beside the data dir by `pg_test_fsync` at the start "
        f"and the end of the run (readings "
        f"{', '.join(str(r.get('fdatasync_ops_per_s')) for r in readings)}), is at best "
        f"{disk.get('flushes_per_s')} fdatasync/s ({disk.get('flush_us')} us): the physical "
        "limit of durable commits "
        "for one writer without group commit. The 'WAL flushes/s' columns give each cell's "
        "flushes (pg_stat_wal) and their share of that limit."
        if disk
        else ""
    )
    FLUSH_LIMIT[:] = [disk["flushes_per_s"]] if disk.get("flushes_per_s") else []
    if machine.get("durable"):
        return (
            "The cluster is **durable**: fsync, full_page_writes and synchronous_commit on and "
            f"PostgreSQL's default WAL settings (read back from the server: {shown})." + flush
        )
    return (
        "The cluster is **not durable** (fsync, full_page_writes or synchronous_commit off; "
        f"read back from the server: {shown}): figures measure CPU and locking, not disk "
        "flushes." + flush
    )


def write_report(
    results: Sequence[dict[str, Any]], markdown: Path, *, started_ms: int, elapsed_s: float
) -> None:
    """Write the Markdown report and its plot next to it (benchmarks.png)."""
    plot = markdown.with_name("benchmarks.png")
    try:
        _plot(results, plot)
        plotted = True
    except ModuleNotFoundError as exc:
        # The figures matter more than the picture: say how to get it and write the rest.
        print(f"# no plot ({exc}); render later: {COMMAND.replace(' all', ' report FILE')}")
        plotted = False
    machine: dict[str, Any] = next((r["machine"] for r in results if r.get("machine")), {})
    when = datetime.fromtimestamp(started_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# QL3 benchmarks",
        "",
        (
            f"Run them: `{COMMAND}` (smoke run: add `--quick`; one part: `python -m bench "
            "throughput|burst|lateness|claim-scale|footprint|verify|prune|worker|profile|"
            "pg-cron|ceiling`; "
            "`--non-durable` for a labelled run on a cluster without fsync). The run starts its "
            "own throwaway PostgreSQL, needs nothing else, and is not part of any test session."
        ),
        "",
        (
            f"Latest run: {when} (database clock), {elapsed_s:.0f} s in all, on "
            f"{machine.get('usable_cores')} cores ({machine.get('cpu')}), PostgreSQL "
            f"{machine.get('postgresql')}, Python {machine.get('python')}. "
            + _durability(machine, results)
            + " The machine is shared with other sessions' test suites, so background load "
            "shows up as noise (the 1-minute load average and the cores other processes took "
            "are in each JSON line): each ratio compares variants measured interleaved in "
            "this same run."
        ),
        "",
        "## Figures against targets",
        "",
    ]
    rows = [
        *summary_rows(results),
        *worker_summary_rows(results),
        *prune_summary_rows(results),
        *pg_cron_rows(results),
        *profile_rows(results),
    ]
    lines += table(["figure", "measured", "target", "met"], rows)
    if plotted:
        lines += [f"![benchmark plot]({plot.name})", ""]
    lines += detail_tables(results)
    lines += worker_tables(results, table)
    lines += pg_cron_tables(results, table)
    lines += _resource("analysis.md")
    lines += _resource("analysis_worker.md")
    # Parts `all` runs at one size only, or not at all: their larger runs are kept in prose.
    lines += _resource("analysis_retention.md")
    lines += _resource("analysis_console.md")
    lines += _resource("method.md")
    lines += [
        "<details><summary>Raw JSON lines of this run</summary>",
        "",
        "```json",
        *(json.dumps(r, sort_keys=False) for r in results),
        "```",
        "",
        "</details>",
        "",
    ]
    markdown.write_text("\n".join(lines), encoding="utf-8")
