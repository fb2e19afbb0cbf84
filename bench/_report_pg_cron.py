"""The pg_cron side by side and the one-primary ceiling in docs/BENCHMARKS.md (summary, tables).

`python -m bench pg-cron` (`_pg_cron`, `_pg_cron_ql3`) and `python -m bench ceiling`
(`_ceiling`): the summary rows report both schedulers' figures side by side (neither is a
target of the other), the tables every measured minute and every concurrency level.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ._report_rows import pick, yes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["pg_cron_rows", "pg_cron_tables"]


def _ms(*values: object) -> str:
    return " / ".join(
        "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values
    )


def _minute(ms: int | None) -> str:
    if ms is None:
        return "all"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M")


def pg_cron_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Summary rows: pg_cron and QL3 side by side, then the ceiling's arithmetic."""
    rows: list[tuple[str, str, str, str]] = []
    for s in pick(results, "pg_cron_summary")[-1:]:
        cron, ql3 = s["pg_cron"], s["ql3"]
        scope = f"{s['jobs']:,} due each minute, {s['minutes']} min"
        rows += [
            (
                f"pg_cron 1.4 ({scope}): job start lateness p50 / p99 / max (row stamp)",
                _ms(cron["start_p50_ms"], cron["start_p99_ms"], cron["start_max_ms"]) + " ms"
                f" (pg_cron's end_time p99 {_ms(cron['details_end_p99_ms'])} ms)",
                "reported",
                "-",
            ),
            (
                "pg_cron: jobs that did not run / failed runs",
                _ms(cron["not_run"], cron["failed"]),
                "0 / 0",
                yes(cron["not_run"] == 0 and not cron["failed"]),
            ),
            (
                f"QL3 R={ql3['replicas']} ({scope}): admission lateness p50 / p99 / max",
                _ms(ql3["admit_p50_ms"], ql3["admit_p99_ms"], ql3["admit_max_ms"]) + " ms",
                "reported",
                "-",
            ),
            (
                f"QL3, {ql3['workers']} workers, command `true`: attempt start p50 / p99 / max",
                _ms(ql3["start_p50_ms"], ql3["start_p99_ms"], ql3["start_max_ms"]) + " ms"
                f" (end p99 {_ms(ql3['end_p99_ms'])} ms)",
                "reported",
                "-",
            ),
            (
                "QL3: not admitted / duplicates / not started",
                _ms(ql3["not_admitted"], ql3["duplicates"], ql3["not_started"]),
                "0 / 0 / 0",
                yes(not ql3["not_admitted"] and not ql3["duplicates"] and not ql3["not_started"]),
            ),
        ]
    for s in pick(results, "ceiling_summary")[-1:]:
        rows.append(
            (
                "Durable commit ceiling of one primary (single-row commits, pgbench)",
                (
                    f"{s['commit_ceiling_per_s']:,.0f}/s with {s['commit_ceiling_clients']}"
                    f" client(s) ({s['commit_ceiling_commits_per_flush']} per flush; 1 client"
                    f" {s['single_client_commits_per_s']:,.0f}/s; disk {s['disk_flushes_per_s']}"
                    " fdatasync/s)"
                ),
                "measured",
                "-",
            )
        )
        rows.extend(
            (
                (
                    f"Admissions/s one primary carries, R={r['replicas']}"
                    f" {r.get('shape', 'catch-up').split(':')[0]}: commit-bound / CPU-bound"
                ),
                (
                    f"{r['wal_bound_admissions_per_s']:,} / {r['cpu_bound_admissions_per_s']:,}"
                    f" (measured {r['admissions_per_s']:,.0f}/s, {r['admissions_per_commit']}"
                    " per commit)"
                ),
                "measured",
                "-",
            )
            for r in s["ql3"]
        )
    return rows


def pg_cron_tables(
    results: Sequence[dict[str, Any]],
    table: Callable[[Sequence[str], Sequence[Sequence[object]]], list[str]],
) -> list[str]:
    """Detail tables of the pg_cron side by side and of the ceiling, when the results hold them."""
    out: list[str] = []
    for cron in pick(results, "pg_cron")[-1:]:
        settings = ", ".join(f"`{k}={v}`" for k, v in cron["cron_settings"].items())
        out += [
            f"## 9. pg_cron side by side ({cron['jobs']:,} jobs due at the top of each minute)",
            "",
            f"pg_cron {cron['pg_cron_version']}, settings read back from the server: {settings}.",
            "",
        ]
        details = {d["minute_ms"]: d for d in cron["details"]}
        out += table(
            [
                "minute (UTC)",
                "jobs ran",
                "not run",
                "start p50 / p99 / max ms (row stamp)",
                "start_time p99 ms",
                "end_time p50 / p99 / max ms",
                "failed",
            ],
            [
                (
                    _minute(h["minute_ms"]),
                    h["ran"],
                    h["not_run"],
                    _ms(h.get("p50_ms"), h.get("p99_ms"), h.get("max_ms")),
                    details.get(h["minute_ms"], {}).get("start_p99_ms", "-"),
                    _ms(
                        *(
                            details.get(h["minute_ms"], {}).get(k)
                            for k in ("end_p50_ms", "end_p99_ms", "end_max_ms")
                        )
                    ),
                    details.get(h["minute_ms"], {}).get("failed", "-"),
                )
                for h in cron["hits"]
            ],
        )
    for ql3 in pick(results, "pg_cron_ql3")[-1:]:
        out += [
            (
                f"QL3 on the same server: R={ql3['replicas']} `ql3 run`, {ql3['settings']};"
                f" {ql3['workers']} `ql3 worker`, {ql3['worker_settings']};"
                f" task `{ql3['command']}`."
            ),
            "",
        ]
        out += table(
            [
                "minute (UTC)",
                "admitted",
                "dup",
                "early",
                "admission p50 / p99 / max ms",
                "started",
                "attempt start p50 / p99 / max ms",
                "attempt end p50 / p99 / max ms",
            ],
            [
                (
                    _minute(v["minute_ms"]),
                    v["admitted"],
                    v["duplicates"],
                    v["early"],
                    _ms(v["admit_p50_ms"], v["admit_p99_ms"], v["admit_max_ms"]),
                    v["started"],
                    _ms(v["start_p50_ms"], v["start_p99_ms"], v["start_max_ms"]),
                    _ms(v["end_p50_ms"], v["end_p99_ms"], v["end_max_ms"]),
                )
                for v in ql3["verdict"]
            ],
        )
    out += _ceiling_tables(results, table)
    return out


def _ceiling_tables(
    results: Sequence[dict[str, Any]],
    table: Callable[[Sequence[str], Sequence[Sequence[object]]], list[str]],
) -> list[str]:
    commits, ql3 = pick(results, "ceiling_commits"), pick(results, "ceiling_ql3")
    if not commits and not ql3:
        return []
    out = ["## 10. Where one primary ends", ""]
    out += table(
        ["clients", "commits", "commits/s", "WAL flushes/s", "commits per flush", "share of disk"],
        [
            (
                c["clients"],
                c["commits"],
                c["commits_per_s"],
                c["wal_syncs_per_s"],
                c["commits_per_flush"],
                c["flush_limit_share"],
            )
            for c in commits
        ],
    )
    out += table(
        [
            "R",
            "load",
            "admissions/s",
            "fenced commits/s",
            "admissions per commit",
            "WAL flushes/s",
            "flushes per admission (whole run)",
            "CPU ms/admission (replica + db)",
            "backlog kept",
        ],
        [
            (
                c["replicas"],
                c["shape"],
                c["admissions_per_s"],
                c["fenced_commits_per_s"],
                c["admissions_per_commit"],
                c["wal_syncs_per_s"],
                c.get("run_wal_syncs_per_admission"),
                f"{c.get('worker_cpu_ms_per_admission')} + {c.get('backend_cpu_ms_per_admission')}",
                yes(c["behind_at_end"] > 0) if c["shape"].startswith("catch-up") else "-",
            )
            for c in ql3
        ],
    )
    return out
