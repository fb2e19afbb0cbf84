"""The profile section of docs/BENCHMARKS.md (`python -m bench profile`, see `_profile`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._report_rows import pick

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["profile_rows", "profile_tables"]


def _percent(share: object) -> str:
    return f"{float(share) * 100:.1f} %" if isinstance(share, int | float) else "-"


def profile_rows(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Return the summary row of the last profile: what the replica spent its time on most."""
    rows: list[tuple[str, str, str, str]] = []
    for run in pick(results, "profile")[-1:]:
        top = (run.get("top_self") or [{}])[0]
        rows.append(
            (
                f"Profile: replica draining {run['schedules']} due at once (R=1), top own frame",
                f"{top.get('frame', '-')} {_percent(top.get('share'))}",
                "-",
                "-",
            )
        )
    return rows


def profile_tables(
    results: Sequence[dict[str, Any]],
    table: Callable[[Sequence[str], Sequence[Sequence[object]]], list[str]],
) -> list[str]:
    """Render the last profile: top entries (self, cumulative) and the two statements' plans."""
    runs = pick(results, "profile")
    if not runs:
        return []
    run = runs[-1]
    out = [
        "## 7. Profile: one replica under a burst",
        "",
        (
            f"{run['schedules']} schedules due at one instant, R = 1, {run['profiler']}: "
            f"{run['samples']} samples, {run['admitted']} admitted in {run['drain_s']} s "
            f"({run['rate_per_s']}/s), CPU per admission {run.get('worker_cpu_ms_per_admission')}"
            f" ms (replica) + {run.get('backend_cpu_ms_per_admission')} ms (its backend)."
        ),
        "",
    ]
    selfs, cumulative = run.get("top_self") or [], run.get("top_cumulative") or []
    out += table(
        ["rank", "own time", "share", "cumulative", "share"],
        [
            (
                rank,
                f"`{own['frame']}`" if own else "",
                _percent(own.get("share")) if own else "",
                f"`{cum['frame']}`" if cum else "",
                _percent(cum.get("share")) if cum else "",
            )
            for rank, (own, cum) in enumerate(
                zip(
                    selfs + [{}] * (len(cumulative) - len(selfs)),
                    cumulative + [{}] * (len(selfs) - len(cumulative)),
                    strict=True,
                ),
                start=1,
            )
        ],
    )
    out += table(
        ["statement", "claims", "execution ms", "nodes with the most own time (ms)"],
        [
            (
                plan["statement"],
                plan.get("claims", "-"),
                plan.get("execution_ms"),
                "; ".join(f"`{n['node']}` {n['own_ms']}" for n in plan.get("top_nodes") or []),
            )
            for plan in run.get("plans") or []
        ],
    )
    return out
