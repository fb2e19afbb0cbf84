"""The detail tables of docs/BENCHMARKS.md: every cell of every measurement, with its diagnostics.

Where the summary says whether a target is met, these say what each cell measured and where its
time went: CPU per admission, WAL and flushes (as a share of the disk's measured flush limit),
wait events, the claim statement's server time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._report_profile import profile_tables
from ._report_prune import prune_tables
from ._report_rows import pick
from ._targets import LATENESS_P99_MS, LATENESS_REPLICAS

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["FLUSH_LIMIT", "detail_tables", "table"]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Render a Markdown table (with the blank line that ends it)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _lateness_target(cell: dict[str, Any]) -> object:
    """Return the p99 target a lateness cell is judged by (`_targets`), or - when it is not."""
    judged = cell.get("variant", "ql3") == "ql3" and cell["replicas"] == LATENESS_REPLICAS
    return LATENESS_P99_MS.get(cell["schedules"], "-") if judged else "-"


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
FLUSH_LIMIT: list[float] = []


def _wal(c: dict[str, Any]) -> str:
    if c.get("wal_syncs_per_s") is None:
        return "-"
    if not FLUSH_LIMIT:
        return str(c["wal_syncs_per_s"])
    return f"{c['wal_syncs_per_s']} ({c['wal_syncs_per_s'] / FLUSH_LIMIT[0]:.1%})"


def _states(c: dict[str, Any]) -> str:
    states = c.get("backend_states") or {}
    return ", ".join(f"{k} {v}" for k, v in list(states.items())[:3]) or "-"


def _claim_server(c: dict[str, Any]) -> tuple[object, str]:
    server = c.get("server_claim") or {}
    return server.get(
        "mean_exec_ms", "-"
    ), f"{server.get('plans', '-')} / {server.get('calls', '-')}"


def detail_tables(results: Sequence[dict[str, Any]]) -> list[str]:
    """Return the Markdown of every detail table, one section per measurement."""
    out = ["## 1. Throughput (backlog drain)", ""]
    out += table(
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
            for c in pick(results, "throughput")
        ],
    )
    out += ["## 1b. Burst at the top of the minute (steady state: one occurrence per schedule)", ""]
    out += table(
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
            for c in pick(results, "burst")
        ],
    )
    out += ["## 2. Steady-state lateness", ""]
    out += table(
        [
            "variant",
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
                c.get("variant", "ql3"),
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
                c["target_p99_ms"]
                if c.get("variant", "ql3") == "ql3" and c["target_p99_ms"]
                else "-",
                _cpu(c),
                _cores(c),
                _wal(c),
            )
            for c in pick(results, "lateness")
        ],
    )
    out += ["## 3. Scale of the claim (16 due)", ""]
    out += table(
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
            for c in pick(results, "claim_scale")
        ],
    )
    out += ["## 4. Footprint", ""]
    out += table(
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
            for c in pick(results, "footprint")
        ],
    )
    out += ["## 5. `ql3 verify` at scale (durable cluster)", ""]
    out += table(
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
            for c in pick(results, "verify")
        ],
    )
    out += prune_tables(results, table)
    out += profile_tables(results, table)
    return out
