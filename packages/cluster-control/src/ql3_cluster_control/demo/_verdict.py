"""The demo's verdict: counting a history read from the database, and showing the result.

Pure functions over the runs the demo read back (`ql3_cluster_postgres.RunRecord`; no I/O, no
clock), so the arithmetic that decides PASS or FAIL is unit-tested on its own. The demo's worker
executes every run it admitted, so a well-formed run ends as 1 run : 1 attempt (succeeded) : 4
events (`run.admitted`, `attempt.queued` at admission; `attempt.running`, `attempt.succeeded`).
Runs an operator triggered (kind `manual`) fill no occurrence: they are counted apart, and each
must have been executed once with the same shape. A Run the overlap policy `skip` ended without
executing it (its command was still running for an earlier Run) is accounted, not executed: 1
run : 1 attempt (skipped) : 3 events (`attempt.skipped` instead of running and succeeded).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict
from rich.table import Table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_cluster_postgres import RunRecord
    from rich.console import Console

__all__ = [
    "ROWS_PER_RUN",
    "DemoVerdict",
    "HistoryCounts",
    "count_history",
    "percentile",
    "show_verdict",
]

# Events of a run executed once: two at admission (the run admitted, its attempt queued), then
# the attempt running and succeeded.
EVENTS_PER_EXECUTED_RUN = 4
ROWS_PER_RUN = f"1:1:{EVENTS_PER_EXECUTED_RUN}"
# Events of a run skipped for overlap: the two at admission, then `attempt.skipped`.
EVENTS_PER_SKIPPED_RUN = 3
# An overlap-skipped Run never executed: its attempt was taken and ended `skipped`.
OVERLAP_SKIP_ROWS = f"1:1:{EVENTS_PER_SKIPPED_RUN}"


class DemoVerdict(BaseModel):
    """The demo's judgement, read from the database after every replica stopped."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    replicas: int
    killed_replica: str | None
    schedules: int
    window_start_ms: int
    window_end_ms: int
    expected: int
    admitted: int
    duplicates: int
    early: int
    missing: int
    unexpected: int
    lateness_p50_ms: int | None
    lateness_p99_ms: int | None
    executed: int
    not_executed: int
    manual_runs: int
    manual_executed: int
    overlap_schedule: str | None
    overlap_executed: int
    overlap_skipped: int
    manual_request_id: str | None
    manual_repeat_existed: bool
    rows_per_run: str
    claims_at_rest: int
    verify_ok: bool
    violations: list[str]
    admissions_by_replica: dict[str, int]
    replica_exit_codes: dict[str, int | None]
    worker_exit_code: int | None


@dataclass(frozen=True)
class HistoryCounts:
    """What a history holds against the occurrences expected up to the window's end."""

    expected: int
    admitted: int
    duplicates: int
    early: int
    missing: int
    unexpected: int
    lateness_p50_ms: int | None
    lateness_p99_ms: int | None
    executed: int
    not_executed: int
    rows_ok: bool
    by_owner: dict[str, int]
    manual: int = 0
    manual_executed: int = 0
    overlap_skipped: int = 0

    @property
    def exact(self) -> bool:
        """Every expected occurrence once, nothing else, none early, each run executed once."""
        return (
            self.expected > 0
            and self.duplicates == self.early == self.missing == self.unexpected == 0
            and self.not_executed == 0
            and self.manual_executed == self.manual
            and self.rows_ok
        )


def percentile(values: Sequence[int], fraction: float) -> int | None:
    """Nearest-rank percentile (`fraction` in 0..1) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least `fraction` of the values at or below it,
    # always one of the values (no interpolation between two latencies).
    rank = max(math.ceil(fraction * len(ordered)) - 1, 0)
    return ordered[min(rank, len(ordered) - 1)]


def _executed(row: RunRecord) -> bool:
    return row.succeeded == 1 and row.live == 0


def _skipped_for_overlap(row: RunRecord) -> bool:
    return (row.attempts, row.skipped, row.live, row.events) == (1, 1, 0, EVENTS_PER_SKIPPED_RUN)


def count_history(
    all_rows: Sequence[RunRecord], expected: set[tuple[int, int]], end_ms: int
) -> HistoryCounts:
    """Count duplicates, early, missing and unexpected admissions up to `end_ms`, and execution.

    Runs after `end_ms` may still be in flight when the window closes: they are not judged for
    completeness, but every run counts for duplicates, earliness, execution and the row shape.
    A run is executed when exactly one of its attempts succeeded and none is still live; one
    the overlap policy skipped is accounted (its occurrence has its Run) but not executed. Manual
    Runs are judged for execution and shape only: they fill no occurrence.
    """
    manual = [row for row in all_rows if row.kind == "manual"]
    rows = [row for row in all_rows if row.kind != "manual"]
    executed = sum(1 for row in rows if _executed(row))
    keys = [(row.schedule_id, row.scheduled_for_ms) for row in rows]
    judged = {key for key in keys if key[1] <= end_ms}
    lateness = [
        row.created_at_ms - row.scheduled_for_ms for row in rows if row.scheduled_for_ms <= end_ms
    ]
    return HistoryCounts(
        expected=len(expected),
        admitted=len(judged & expected),
        # Each extra run of an occurrence is one duplicate: three runs of one occurrence are two.
        duplicates=sum(count - 1 for count in Counter(keys).values()),
        early=sum(1 for row in rows if row.created_at_ms < row.scheduled_for_ms),
        missing=len(expected - judged),
        unexpected=len(judged - expected),
        lateness_p50_ms=percentile(lateness, 0.50),
        lateness_p99_ms=percentile(lateness, 0.99),
        executed=executed,
        not_executed=len(rows) - executed - sum(1 for row in rows if _skipped_for_overlap(row)),
        rows_ok=all(
            (row.attempts, row.succeeded, row.events) == (1, 1, EVENTS_PER_EXECUTED_RUN)
            or _skipped_for_overlap(row)
            for row in all_rows
        ),
        by_owner=dict(sorted(Counter(row.owner_id for row in rows).items())),
        manual=len(manual),
        manual_executed=sum(1 for row in manual if _executed(row)),
        overlap_skipped=sum(1 for row in rows if _skipped_for_overlap(row)),
    )


def show_verdict(verdict: DemoVerdict, console: Console) -> None:
    """Print the verdict as a table, then PASS or FAIL."""
    console.print()
    table = Table(title="verdict (read from the database)", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for label, value in (
        ("replicas (SIGKILLed)", f"{verdict.replicas} ({verdict.killed_replica or 'none'})"),
        ("schedules", verdict.schedules),
        ("occurrences expected (due within the run)", verdict.expected),
        ("admitted of those", verdict.admitted),
        ("duplicates", verdict.duplicates),
        ("early (before their time by DB clock)", verdict.early),
        ("missing", verdict.missing),
        (
            "lateness p50 / p99 (ms, DB time)",
            f"{verdict.lateness_p50_ms} / {verdict.lateness_p99_ms}",
        ),
        ("executed by the worker (one succeeded attempt)", verdict.executed),
        ("not executed", verdict.not_executed),
        (
            "manual runs (trigger sent twice, one request id)",
            (
                f"{verdict.manual_runs} admitted, {verdict.manual_executed} executed; second"
                f" call {'found it' if verdict.manual_repeat_existed else 'ADMITTED ANOTHER'}"
            ),
        ),
        (
            f"overlap skip ({verdict.overlap_schedule}: a 1.5 s command every second)",
            (
                f"{verdict.overlap_executed} executed, {verdict.overlap_skipped} skipped for"
                " overlap (each recorded; never two at once: ql3 verify)"
            ),
        ),
        (
            f"rows per run (run:attempt:events; {OVERLAP_SKIP_ROWS} an overlap skip)",
            verdict.rows_per_run,
        ),
        ("claims left at rest", verdict.claims_at_rest),
        ("ql3 verify", "clean" if verdict.verify_ok else f"{len(verdict.violations)} violations"),
    ):
        table.add_row(label, str(value))
    console.print(table)
    for violation in verdict.violations:
        console.print(f"  violation: {violation}")
    console.print(
        "PASS: every occurrence admitted exactly once, none early, each executed once;"
        " the manual run admitted once and executed once; overlap skips recorded"
        if verdict.ok
        else "FAIL"
    )
