"""The retention tables of docs/BENCHMARKS.md (`python -m bench prune`, see `_prune`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._report_rows import pick, yes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["prune_tables"]


def prune_tables(
    results: Sequence[dict[str, Any]],
    table: Callable[[Sequence[str], Sequence[Sequence[object]]], list[str]],
) -> list[str]:
    """Render the prune at scale and the hourly run, when the results hold them."""
    scale, hourly = pick(results, "prune"), pick(results, "prune_hourly")
    if not scale and not hourly:
        return []
    out = ["## 6. Retention: `ql3 history prune`", ""]
    out += table(
        [
            "history",
            "runs before / after (expected, drift allowed)",
            "batches (checkpoints)",
            "prune s",
            "runs removed/s",
            "WAL MB",
            "history MB before / after",
            "verify s before / after",
            "clean before / after",
        ],
        [
            (
                f"{c['schedules']} x {c['occurrences_per_schedule']}",
                (
                    f"{c['runs_before']} / {c['runs_after']}"
                    f" ({c.get('runs_expected_after', '-')}, {c.get('cutoff_drift_runs_max', '-')})"
                ),
                f"{c['batches']} ({c['checkpoints']})",
                c["prune_s"],
                c["runs_removed_per_s"],
                c["wal_mb"],
                f"{c['history_mb_before']} / {c['history_mb_after']}",
                f"{c['verify_before']['verify_s']} / {c['verify_after']['verify_s']}",
                f"{yes(c['met']['clean_before'])} / {yes(c['met']['clean_after'])}",
            )
            for c in scale
        ],
    )
    for run in hourly:
        sentence = (
            f"Hourly pruning, {run['schedules']} per-second schedules, {run['hours']} simulated"
            f" hours (database clock moved by libfaketime), `--older-than {run['retain_h']}h`,"
            f" {run.get('vacuum', 'VACUUM after each prune')}: flat {yes(run['met']['flat'])}"
            f" (plateau / size when the retention filled: {run.get('plateau_over_full', '-')}),"
            f" verify clean {yes(run['met']['verify_ok'])}."
        )
        out += [sentence, ""]
        out += table(
            ["hour", "runs kept", "removed", "prune s", "WAL MB", "history MB", "database MB"],
            [
                (
                    h["hour"],
                    h["runs"],
                    h["removed"],
                    h["prune_s"],
                    h["wal_mb"],
                    h["history_mb"],
                    h["database_mb"],
                )
                for h in run["per_hour"]
            ],
        )
    return out
