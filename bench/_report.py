"""Write docs/BENCHMARKS.md (figures vs targets) and docs/benchmarks.png from the JSON lines.

matplotlib comes from the `bench` dependency group and is imported only here, with the Agg
backend (no display). The report's date is the database's clock at the start of the run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["write_report"]

COMMAND = "uv run --group bench python -m bench all"


def _pick(results: Sequence[dict[str, Any]], measurement: str) -> list[dict[str, Any]]:
    return [r for r in results if r.get("measurement") == measurement]


def _yes(flag: object) -> str:
    return "yes" if flag is True else ("**NO**" if flag is False else "-")


def _summary_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    for tput in _pick(results, "throughput_summary")[-1:]:
        ratios, met = tput["ratios"], tput["met"]
        base, ql3 = tput["baseline_rate_per_s"], tput["ql3_rate_per_s"]
        rows.extend(
            (
                f"Catch-up throughput R={r} / bare-SQL baseline R={r}",
                f"{ratios[f'r{r}_vs_baseline']:.2f} ({ql3.get(r)}/s vs {base.get(r)}/s)",
                ">= 0.8",
                _yes(met.get(f"r{r}_vs_baseline")),
            )
            for r in sorted(ql3)
            if f"r{r}_vs_baseline" in ratios
        )
        rows.extend(
            (
                f"Catch-up throughput R={r} / R=1",
                f"{ratios[f'r{r}_vs_r1']:.2f} ({ql3.get(str(r))}/s)",
                ">= 0.9",
                _yes(met[f"r{r}_vs_r1"]),
            )
            for r in (2, 4)
            if f"r{r}_vs_r1" in ratios
        )
    rows.extend(_burst_rows(results))
    cells = _pick(results, "throughput")
    if cells:
        dups = sum(c["duplicates"] for c in cells)
        retries = ", ".join(
            f"R={c['replicas']}: {c['serialization_retries_window']}"
            for c in cells
            if c["variant"] == "ql3"
        )
        rows.append(("Throughput duplicates (all cells)", str(dups), "0", _yes(dups == 0)))
        dry = sum(1 for c in cells if c["behind_at_end"] == 0)
        rows.append(
            ("Cells whose backlog ran dry (rate capped)", str(dry), "0 (validity)", _yes(dry == 0))
        )
        rows.append(("40001 retries in the window (QL3)", retries, "reported", "-"))
    for summary in _pick(results, "lateness_summary")[-1:]:
        rows.extend(
            (
                f"Lateness p99, S={cell['schedules']}, R={cell['replicas']}"
                + (f" (worst of {cell['passes']} passes)" if cell["passes"] > 1 else ""),
                f"{cell['p99_ms']} ms"
                + (
                    f" ({', '.join(str(v) for v in cell['p99_ms_passes'])})"
                    if cell["passes"] > 1
                    else ""
                ),
                f"<= {cell['target_p99_ms']} ms",
                _yes(cell["met_p99"]),
            )
            for cell in summary["cells"]
            if cell.get("target_p99_ms") is not None
        )
    late = _pick(results, "lateness")
    if late:
        bad = {k: sum(c[k] for c in late) for k in ("missing", "duplicates", "early")}
        rows.append(
            (
                "Lateness missing / duplicates / early (all cells)",
                " / ".join(str(v) for v in bad.values()),
                "0 / 0 / 0",
                _yes(not any(bad.values())),
            )
        )
    rows.extend(
        (
            f"Claim latency ratio {claim['ratio_of']} (p50; p99 {claim['ratio_p99']})",
            f"{claim['ratio_p50']:.2f}",
            "<= 1.5",
            _yes(claim["met"]["ratio_p50"]),
        )
        for claim in _pick(results, "claim_scale_summary")[-1:]
    )
    for foot in _pick(results, "footprint")[-1:]:
        rows.append(
            (
                f"Peak RSS of one replica, {foot['schedules']} schedules",
                f"{foot['rss_peak_mb']} MB",
                "<= 80 MB",
                _yes(foot["met"]["rss"]),
            )
        )
        rows.append(
            ("Connections held per replica", str(foot["connections_held_max"]), "reported", "-")
        )
    rows.extend(_verify_rows(results))
    return rows


def _burst_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    cells = _pick(results, "burst")
    for summary in _pick(results, "burst_summary")[-1:]:
        rates = summary["rate_per_s"]
        rows.extend(
            (
                (
                    f"Steady-state throughput R={r} / bare-SQL baseline R={r} "
                    f"(burst of {summary['schedules']:,}, one occurrence per schedule)"
                ),
                f"{ratio:.2f} ({rates['ql3'].get(r)}/s vs {rates['baseline'].get(r)}/s)",
                ">= 0.8",
                _yes(ratio >= 0.8),  # noqa: PLR2004 - the target of the row, stated beside it
            )
            for key, ratio in sorted(summary["ratios"].items())
            if (r := key.removeprefix("r").removesuffix("_vs_baseline"))
        )
    for cell in cells:
        if cell["variant"] != "ql3" or cell.get("target_drain_s") is None:
            continue
        base = next(
            (c for c in cells if c["variant"] == "baseline" and c["replicas"] == cell["replicas"]),
            {},
        )
        rows.append(
            (
                (
                    f"Burst of {cell['schedules']:,} at the top of the minute, "
                    f"R={cell['replicas']}: time to admit all (p99; baseline)"
                ),
                f"{cell['drain_s']} s (p99 {cell['p99_ms']} ms; baseline {base.get('drain_s')} s)",
                f"<= {cell['target_drain_s']:.0f} s",
                _yes(cell["met"].get("drain")),
            )
        )
        rows.append(
            (
                (
                    f"Burst R={cell['replicas']} not admitted by +55 s (harness deadline) / "
                    "duplicates / early"
                ),
                f"{cell['missing']} / {cell['duplicates']} / {cell['early']}",
                "0 / 0 / 0",
                _yes(cell["met"]["clean"]),
            )
        )
    return rows


def _verify_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Summary rows of `ql3 verify` at scale (bench/_verify.py): the largest size measured.

    The targets are for 10 M runs; a smaller (`--quick`) size is judged against them as well.
    """
    cells = sorted(_pick(results, "verify"), key=lambda c: c["runs"])[-1:]
    rows: list[tuple[str, str, str, str]] = []
    for c in cells:
        clean, violated = c["clean"], c["violated"]
        worst_s = max(clean["verify_s"], violated["verify_s"])
        worst_mb = max(clean["rss_peak_mb"], violated["rss_peak_mb"])
        rows.append(
            (
                f"ql3 verify, {c['runs']:,} runs (durable): time clean / violated",
                f"{clean['verify_s']} s / {violated['verify_s']} s",
                f"<= {c['target_s']:.0f} s",
                _yes(worst_s <= c["target_s"]),
            )
        )
        rows.append(
            (
                f"ql3 verify, {c['runs']:,} runs: peak RSS clean / violated",
                f"{clean['rss_peak_mb']} MB / {violated['rss_peak_mb']} MB",
                f"<= {c['target_rss_mb']:.0f} MB",
                _yes(worst_mb <= c["target_rss_mb"]),
            )
        )
        rows.append(
            (
                "ql3 verify: clean history passes, planted violations found exactly",
                f"{clean['ok']}, {violated['violations']}",
                f"True, {c['planted']}",
                _yes(c["met"]["clean_ok"] and c["met"]["violations_exact"]),
            )
        )
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _cpu(c: dict[str, Any]) -> str:
    worker, backend = c.get("worker_cpu_ms_per_admission"), c.get("backend_cpu_ms_per_admission")
    if c.get("measurement") == "burst" and c.get("admitted"):
        # Per admitted occurrence (a burst not drained by its deadline admitted fewer).
        worker = float(c["worker_cpu_s"]) * 1000 / c["admitted"]
        backend = float(c["backend_cpu_s"]) * 1000 / c["admitted"]
    return "-" if worker is None or backend is None else f"{worker:.3f} + {backend:.3f}"


def _cores(c: dict[str, Any]) -> str:
    ours, others = c.get("cores_busy_ours"), c.get("cores_busy_others")
    return "-" if ours is None else f"{ours} / {others}"


# The disk's best flush rate of the run (set by write_report): the shares are taken against it.
_FLUSH_LIMIT: list[float] = []


def _wal(c: dict[str, Any]) -> str:
    if c.get("wal_syncs_per_s") is None:
        return "-"
    if not _FLUSH_LIMIT:
        return str(c["wal_syncs_per_s"])
    return f"{c['wal_syncs_per_s']} ({c['wal_syncs_per_s'] / _FLUSH_LIMIT[0]:.1%})"


def _states(c: dict[str, Any]) -> str:
    states = c.get("backend_states") or {}
    return ", ".join(f"{k} {v}" for k, v in list(states.items())[:3]) or "-"


def _claim_server(c: dict[str, Any]) -> tuple[object, str]:
    server = c.get("server_claim") or {}
    return server.get(
        "mean_exec_ms", "-"
    ), f"{server.get('plans', '-')} / {server.get('calls', '-')}"


def _detail_tables(results: Sequence[dict[str, Any]]) -> list[str]:
    out = ["## 1. Throughput (backlog drain)", ""]
    out += _table(
        [
            "variant",
            "R",
            "window ms",
            "admissions",
            "per s",
            "dup",
            "40001 (window)",
            "behind at end",
            "CPU ms/admission (worker + db)",
            "cores ours / others",
            "WAL flushes/s (share of disk)",
            "db backends (mean)",
        ],
        [
            (
                c["variant"],
                c["replicas"],
                c["window_ms"],
                c["admissions"],
                c["rate_per_s"],
                c["duplicates"],
                c["serialization_retries_window"],
                c["behind_at_end"],
                _cpu(c),
                _cores(c),
                _wal(c),
                _states(c),
            )
            for c in _pick(results, "throughput")
        ],
    )
    out += ["## 1b. Burst at the top of the minute (steady state: one occurrence per schedule)", ""]
    out += _table(
        [
            "variant",
            "R",
            "schedules",
            "admitted",
            "not admitted by +55 s",
            "dup",
            "early",
            "p50 ms",
            "p99 ms",
            "drain s",
            "per s",
            "40001",
            "CPU ms/admission (worker + db)",
            "cores ours / others",
            "WAL flushes/s (share of disk)",
        ],
        [
            (
                c["variant"],
                c["replicas"],
                c["schedules"],
                c["admitted"],
                c["missing"],
                c["duplicates"],
                c["early"],
                c["p50_ms"],
                c["p99_ms"],
                c["drain_s"],
                c["rate_per_s"],
                c["serialization_retries_total"],
                _cpu(c),
                _cores(c),
                _wal(c),
            )
            for c in _pick(results, "burst")
        ],
    )
    out += ["## 2. Steady-state lateness", ""]
    out += _table(
        [
            "S",
            "R",
            "expected",
            "admitted",
            "missing",
            "dup",
            "early",
            "p50 ms",
            "p99 ms",
            "max ms",
            "target p99",
            "CPU ms/admission (worker + db)",
            "cores ours / others",
            "WAL flushes/s (share of disk)",
        ],
        [
            (
                c["schedules"],
                c["replicas"],
                c["expected"],
                c["admitted"],
                c["missing"],
                c["duplicates"],
                c["early"],
                c["p50_ms"],
                c["p99_ms"],
                c["max_ms"],
                c["target_p99_ms"] or "-",
                _cpu(c),
                _cores(c),
                _wal(c),
            )
            for c in _pick(results, "lateness")
        ],
    )
    out += ["## 3. Scale of the claim (16 due)", ""]
    out += _table(
        [
            "schedules",
            "samples",
            "p50 ms",
            "p99 ms",
            "max ms",
            "server exec ms",
            "server plans / calls",
        ],
        [
            (
                c["schedules"],
                c["samples"],
                c["p50_ms"],
                c["p99_ms"],
                c["max_ms"],
                *_claim_server(c),
            )
            for c in _pick(results, "claim_scale")
        ],
    )
    out += ["## 4. Footprint", ""]
    out += _table(
        [
            "schedules",
            "run s",
            "peak RSS MB",
            "last RSS MB",
            "RSS at each minute MB",
            "connections",
            "admitted",
        ],
        [
            (
                c["schedules"],
                c["run_s"],
                c["rss_peak_mb"],
                c["rss_last_mb"],
                ", ".join(str(v) for v in c.get("rss_per_minute_mb", [])) or "-",
                c["connections_held_max"],
                c["admitted"],
            )
            for c in _pick(results, "footprint")
        ],
    )
    out += ["## 5. `ql3 verify` at scale (durable cluster)", ""]
    out += _table(
        [
            "schedules x occurrences",
            "runs",
            "history MB",
            "build s",
            "verify s clean / violated",
            "peak RSS MB clean / violated (floor)",
            "violations found",
        ],
        [
            (
                f"{c['schedules']} x {c['occurrences_per_schedule']}",
                c["runs"],
                c["history_mb"],
                c["build_s"],
                f"{c['clean']['verify_s']} / {c['violated']['verify_s']}",
                (
                    f"{c['clean']['rss_peak_mb']} / {c['violated']['rss_peak_mb']}"
                    f" ({c['clean']['rss_floor_mb']})"
                ),
                c["violated"]["violations"],
            )
            for c in _pick(results, "verify")
        ],
    )
    return out


def _plot(results: Sequence[dict[str, Any]], target: Path) -> None:
    import matplotlib as mpl  # noqa: PLC0415 - only the report needs matplotlib (bench group)

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after choosing the backend

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    tput = _pick(results, "throughput")
    labels = [f"{c['variant']}\nR={c['replicas']}" for c in tput]
    ax = axes[0][0]
    ax.bar(range(len(tput)), [c["rate_per_s"] for c in tput], color="tab:blue")
    ax.set_xticks(range(len(tput)), labels, fontsize=8)
    ax.set_ylabel("admissions / s (DB time)")
    ax.set_title("1. Throughput, backlog drain")
    ax = axes[0][1]
    summaries = _pick(results, "lateness_summary")
    late = summaries[-1]["cells"] if summaries else _pick(results, "lateness")
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
    for size, limit in ((100, 20), (1000, 150)):
        ax.axhline(limit, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"target S={size}", (1, limit), fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("replicas")
    ax.set_ylabel("lateness ms")
    ax.set_title("2. Lateness (every-second schedules)")
    ax.legend(fontsize=7)
    ax = axes[1][0]
    claim = _pick(results, "claim_scale")
    ax.plot([c["schedules"] for c in claim], [c["p50_ms"] for c in claim], "o-", label="p50")
    ax.plot([c["schedules"] for c in claim], [c["p99_ms"] for c in claim], "x--", label="p99")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("schedules (16 due)")
    ax.set_ylabel("claim ms")
    ax.set_title("3. Claim latency vs idle schedules")
    ax.legend(fontsize=7)
    ax = axes[1][1]
    foot = _pick(results, "footprint")
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
    readings = _pick(results, "disk")
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
    _FLUSH_LIMIT[:] = [disk["flushes_per_s"]] if disk.get("flushes_per_s") else []
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
            "throughput|burst|lateness|claim-scale|footprint|verify`; `--non-durable` for a "
            "labelled run on a cluster without fsync). The run starts its own throwaway "
            "PostgreSQL, needs nothing else, and is not part of any test session."
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
    lines += _table(["figure", "measured", "target", "met"], _summary_rows(results))
    if plotted:
        lines += [f"![benchmark plot]({plot.name})", ""]
    lines += _detail_tables(results)
    lines += _resource("analysis.md")
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
