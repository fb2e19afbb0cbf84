"""The summary table of docs/BENCHMARKS.md: each headline figure, its target and whether it is met.

One row per figure (throughput ratios, burst drain, lateness, claim scale, footprint, verify at
scale), each read from the last JSON line of its measurement and judged here against the targets
of `_targets` (not the verdict stored in the line: an older run is shown against today's targets);
`pick` and `yes` are shared with the detail tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._targets import (
    BURST_DRAIN_S,
    BURST_REPLICAS,
    CLAIM_RATIO,
    LATENESS_P99_MS,
    LATENESS_REPLICAS,
    REPLICA_RSS_MB,
    RN_VS_R1,
    VERIFY_RSS_MB,
    VERIFY_S,
    VS_BASELINE,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["burst_rows", "pick", "summary_rows", "verify_rows", "yes"]


def pick(results: Sequence[dict[str, Any]], measurement: str) -> list[dict[str, Any]]:
    """Return the JSON lines of one measurement, in the order they were written."""
    return [r for r in results if r.get("measurement") == measurement]


def yes(flag: object) -> str:
    """Render a target verdict: yes, **NO** (bold, so a miss stands out), or - when unjudged."""
    return "yes" if flag is True else ("**NO**" if flag is False else "-")


def summary_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the summary rows (figure, measured, target, met) of every headline figure."""
    rows: list[tuple[str, str, str, str]] = []
    for tput in pick(results, "throughput_summary")[-1:]:
        ratios = tput["ratios"]
        base, ql3 = tput["baseline_rate_per_s"], tput["ql3_rate_per_s"]
        rows.extend(
            (
                f"Catch-up throughput R={r} / bare-SQL baseline R={r}",
                f"{ratio:.2f} ({ql3.get(r)}/s vs {base.get(r)}/s)",
                f">= {VS_BASELINE}",
                yes(ratio >= VS_BASELINE),
            )
            for r in sorted(ql3)
            if (ratio := ratios.get(f"r{r}_vs_baseline")) is not None
        )
        rows.extend(
            (
                f"Catch-up throughput R={r} / R=1",
                f"{ratio:.2f} ({ql3.get(str(r))}/s vs {ql3.get('1')}/s)",
                f">= {RN_VS_R1}",
                yes(ratio >= RN_VS_R1),
            )
            for r in (2, 4)
            if (ratio := ratios.get(f"r{r}_vs_r1")) is not None
        )
    rows.extend(burst_rows(results))
    cells = pick(results, "throughput")
    if cells:
        dups = sum(c["duplicates"] for c in cells)
        retries = ", ".join(
            f"R={c['replicas']}: {c['serialization_retries_window']}"
            for c in cells
            if c["variant"] == "ql3"
        )
        rows.append(("Throughput duplicates (all cells)", str(dups), "0", yes(dups == 0)))
        dry = sum(1 for c in cells if c["behind_at_end"] == 0)
        rows.append(
            ("Cells whose backlog ran dry (rate capped)", str(dry), "0 (validity)", yes(dry == 0))
        )
        rows.append(("40001 retries in the window (QL3)", retries, "reported", "-"))
    for summary in pick(results, "lateness_summary")[-1:]:
        rows.extend(_lateness_rows(summary["cells"]))
    late = pick(results, "lateness")
    if late:
        bad = {k: sum(c[k] for c in late) for k in ("missing", "duplicates", "early")}
        rows.append(
            (
                "Lateness missing / duplicates / early (all cells)",
                " / ".join(str(v) for v in bad.values()),
                "0 / 0 / 0",
                yes(not any(bad.values())),
            )
        )
    rows.extend(
        (
            f"Claim latency ratio {claim['ratio_of']} (p50; p99 {claim['ratio_p99']})",
            f"{claim['ratio_p50']:.2f}",
            f"<= {CLAIM_RATIO}",
            yes(claim["ratio_p50"] <= CLAIM_RATIO),
        )
        for claim in pick(results, "claim_scale_summary")[-1:]
    )
    for foot in pick(results, "footprint")[-1:]:
        rows.append(
            (
                f"Peak RSS of one replica, {foot['schedules']} schedules",
                f"{foot['rss_peak_mb']} MB",
                f"<= {REPLICA_RSS_MB:.0f} MB",
                yes(foot["rss_peak_mb"] <= REPLICA_RSS_MB),
            )
        )
        rows.append(
            ("Connections held per replica", str(foot["connections_held_max"]), "reported", "-")
        )
    rows.extend(verify_rows(results))
    return rows


def _passes(cell: dict[str, Any]) -> str:
    """Render a lateness cell's worst p99, with every pass's when there were several."""
    passes = cell["p99_ms_passes"] if cell["passes"] > 1 else []
    return f"{cell['p99_ms']} ms" + (f" ({', '.join(str(v) for v in passes)})" if passes else "")


def _lateness_rows(cells: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the judged lateness rows (R = 2), each with the bare-SQL baseline beside it."""
    baseline = {(c["schedules"], c["replicas"]): c for c in cells if c.get("variant") == "baseline"}
    rows = []
    for cell in cells:
        target = LATENESS_P99_MS.get(cell["schedules"])
        if cell.get("variant", "ql3") != "ql3" or cell["replicas"] != LATENESS_REPLICAS:
            continue
        if target is None:
            continue
        base = baseline.get((cell["schedules"], cell["replicas"]))
        worst = f" (worst of {cell['passes']} passes)" if cell["passes"] > 1 else ""
        beside = "" if base is None else f"; bare-SQL baseline {_passes(base)}"
        rows.append(
            (
                f"Lateness p99, S={cell['schedules']}, R={cell['replicas']}{worst}",
                _passes(cell) + beside,
                f"<= {target} ms",
                yes(cell["p99_ms"] is not None and cell["p99_ms"] <= target),
            )
        )
    return rows


def burst_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the summary rows of the burst measurements: throughput ratios, then each cell."""
    rows: list[tuple[str, str, str, str]] = []
    cells = pick(results, "burst")
    for summary in pick(results, "burst_summary")[-1:]:
        rates = summary["rate_per_s"]
        rows.extend(
            (
                (
                    f"Steady-state throughput R={r} / bare-SQL baseline R={r} "
                    f"(burst of {summary['schedules']:,}, one occurrence per schedule)"
                ),
                f"{ratio:.2f} ({rates['ql3'].get(r)}/s vs {rates['baseline'].get(r)}/s)",
                f">= {VS_BASELINE}",
                yes(ratio >= VS_BASELINE),
            )
            for key, ratio in sorted(summary["ratios"].items())
            if (r := key.removeprefix("r").removesuffix("_vs_baseline"))
        )
        one = rates["ql3"].get("1")
        rows.extend(
            (
                f"Steady-state throughput R={r} / R=1 (the same burst)",
                f"{rate / one:.2f} ({rate}/s vs {one}/s)",
                f">= {RN_VS_R1}",
                yes(rate / one >= RN_VS_R1),
            )
            for r, rate in sorted(rates["ql3"].items())
            if r != "1" and one and rate is not None
        )
    for cell in cells:
        if cell["variant"] != "ql3" or cell["replicas"] != BURST_REPLICAS:
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
                f"<= {BURST_DRAIN_S:.0f} s",
                yes(
                    cell["drain_s"] is not None
                    and cell["drain_s"] <= BURST_DRAIN_S
                    and cell["met"]["clean"]
                ),
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
                yes(cell["met"]["clean"]),
            )
        )
    return rows


def verify_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Summary rows of `ql3 verify` at scale (bench/_verify.py): the largest size measured.

    The targets are for 10 M runs; a smaller (`--quick`) size is judged against them as well.
    """
    cells = sorted(pick(results, "verify"), key=lambda c: c["runs"])[-1:]
    rows: list[tuple[str, str, str, str]] = []
    for c in cells:
        clean, violated = c["clean"], c["violated"]
        worst_s = max(clean["verify_s"], violated["verify_s"])
        worst_mb = max(clean["rss_peak_mb"], violated["rss_peak_mb"])
        rows.append(
            (
                f"ql3 verify, {c['runs']:,} runs (durable): time clean / violated",
                f"{clean['verify_s']} s / {violated['verify_s']} s",
                f"<= {VERIFY_S:.0f} s",
                yes(worst_s <= VERIFY_S),
            )
        )
        rows.append(
            (
                f"ql3 verify, {c['runs']:,} runs: peak RSS clean / violated",
                f"{clean['rss_peak_mb']} MB / {violated['rss_peak_mb']} MB",
                f"<= {VERIFY_RSS_MB:.0f} MB",
                yes(worst_mb <= VERIFY_RSS_MB),
            )
        )
        rows.append(
            (
                "ql3 verify: clean history passes, planted violations found exactly",
                f"{clean['ok']}, {violated['violations']}",
                f"True, {c['planted']}",
                yes(c["met"]["clean_ok"] and c["met"]["violations_exact"]),
            )
        )
    return rows
