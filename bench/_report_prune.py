"""The retention tables of docs/BENCHMARKS.md (`python -m bench prune`, see `_prune`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._report_rows import pick, yes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["prune_summary_rows", "prune_tables"]


def _millions(runs: int) -> str:
    return f"{runs / 1e6:.1f} M" if runs >= 950_000 else f"{round(runs / 1000)} k"  # noqa: PLR2004


def _scale_row(c: dict[str, Any]) -> tuple[str, str, str, str]:
    before, after = c["verify_before"], c["verify_after"]
    kept = c["met"].get("kept_as_expected")
    figure = (
        f"history prune {_millions(c['runs_before'])} Runs -> {_millions(c['runs_after'])}"
        " (durable): time, WAL, verify before / after (section 6)"
    )
    measured = (
        f"{c['prune_s']} s ({c['runs_removed_per_s']} Runs/s, {c['batches']} batches),"
        f" {round(c['wal_mb'])} MB WAL ({c['wal_bytes_per_run_removed']} bytes per Run"
        f" removed), verify {before['verify_s']} / {after['verify_s']} s, clean"
        f" {yes(before['ok'])} / {yes(after['ok'])}, kept as expected {yes(kept)}"
    )
    met = before["ok"] is True and after["ok"] is True and kept is True
    return (figure, measured, "measured, clean, kept as expected", yes(met))


def _hourly_row(run: dict[str, Any]) -> tuple[str, str, str, str]:
    vacuum = run.get("vacuum", "VACUUM after each prune")
    figure = (
        f"{run['hours']} simulated hours of hourly pruning (`--older-than {run['retain_h']}h`,"
        f" {vacuum}): database size levels off"
    )
    measured = (
        f"plateau / size when the retention filled: {run.get('plateau_over_full', '-')};"
        f" verify clean {yes(run['met']['verify_ok'])}"
    )
    met = run["met"]["flat"] is True and run["met"]["verify_ok"] is True
    return (figure, measured, "flat", yes(met))


def prune_summary_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the headline rows: every prune at scale (largest first), every hourly run."""
    scale = sorted(pick(results, "prune"), key=lambda c: -int(c["runs_before"]))
    return [*map(_scale_row, scale), *map(_hourly_row, pick(results, "prune_hourly"))]


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
            "build s",
            "prune s",
            "runs removed/s",
            "WAL MB (bytes per run removed)",
            "VACUUM s",
            "history MB before / after VACUUM",
            "verify s before / after",
            "clean before / after, kept as expected",
        ],
        [
            (
                f"{c['schedules']} x {c['occurrences_per_schedule']}",
                (
                    f"{c['runs_before']} / {c['runs_after']}"
                    f" ({c.get('runs_expected_after', '-')}, {c.get('cutoff_drift_runs_max', '-')})"
                ),
                f"{c['batches']} ({c['checkpoints']})",
                c.get("build_s", "-"),
                c["prune_s"],
                c["runs_removed_per_s"],
                f"{c['wal_mb']} ({c.get('wal_bytes_per_run_removed', '-')})",
                c.get("vacuum_s", "-"),
                f"{c['history_mb_before']} / {c['history_mb_after']}",
                f"{c['verify_before']['verify_s']} / {c['verify_after']['verify_s']}",
                (
                    f"{yes(c['met']['clean_before'])} / {yes(c['met']['clean_after'])},"
                    f" {yes(c['met'].get('kept_as_expected'))}"
                ),
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
