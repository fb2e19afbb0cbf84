"""The demo's verdict arithmetic: duplicates, early, missing, unexpected, lateness, execution."""

from __future__ import annotations

from ql3_cluster_control.demo._verdict import count_history, percentile
from ql3_cluster_postgres import RunRecord


def _row(
    schedule: int,
    at: int,
    created: int,
    *,
    events: int = 4,
    attempts: int = 1,
    succeeded: int = 1,
    live: int = 0,
    kind: str = "cron",
    skipped: int = 0,
) -> RunRecord:
    return RunRecord(
        schedule_id=schedule,
        scheduled_for_ms=at,
        created_at_ms=created,
        owner_id="r",
        attempts=attempts,
        events=events,
        succeeded=succeeded,
        live=live,
        kind=kind,
        skipped=skipped,
    )


def test_exact_history_passes() -> None:
    """Every expected occurrence once, on time, executed once (1:1:4): exact, with percentiles."""
    rows = [_row(1, 1_000, 1_010), _row(1, 2_000, 2_030), _row(2, 1_000, 1_005)]
    counts = count_history(rows, {(1, 1_000), (1, 2_000), (2, 1_000)}, end_ms=2_000)
    assert counts.exact
    assert counts.admitted == counts.executed == 3
    assert counts.not_executed == 0
    assert counts.lateness_p50_ms == 10
    assert counts.lateness_p99_ms == 30


def test_each_defect_is_counted_and_fails_the_verdict() -> None:
    """A duplicate, an early run, a missing and an unexpected occurrence each break exactness."""
    rows = [
        _row(1, 1_000, 1_010),
        _row(1, 1_000, 1_020),  # duplicate
        _row(1, 3_000, 2_990),  # early (and beyond the window: still judged for earliness)
        _row(2, 1_500, 1_600),  # unexpected
    ]
    counts = count_history(rows, {(1, 1_000), (1, 2_000)}, end_ms=2_000)
    assert counts.duplicates == 1
    assert counts.early == 1
    assert counts.missing == 1
    assert counts.unexpected == 1
    assert not counts.exact


def test_wrong_row_shape_and_empty_expectation_fail() -> None:
    """A run with one event, or a window that expected nothing, is not a passing history."""
    assert not count_history([_row(1, 1_000, 1_000, events=1)], {(1, 1_000)}, 1_000).exact
    assert not count_history([], set(), 1_000).exact


def test_a_run_not_executed_once_fails() -> None:
    """A run still queued, or one that needed a retry, is counted and breaks exactness."""
    queued = _row(1, 1_000, 1_000, events=2, succeeded=0, live=1)
    retried = _row(1, 2_000, 2_000, events=7, attempts=2)
    counts = count_history([queued, retried], {(1, 1_000), (1, 2_000)}, 2_000)
    assert (counts.executed, counts.not_executed) == (1, 1)
    assert not counts.rows_ok
    assert not counts.exact
    alone = count_history([retried], {(1, 2_000)}, 2_000)
    assert (alone.not_executed, alone.rows_ok, alone.exact) == (0, False, False)


def test_percentile_is_nearest_rank() -> None:
    """p50 and p99 follow the nearest-rank definition; empty input has none."""
    values = list(range(1, 101))
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.99) == 99
    assert percentile([7], 0.99) == 7
    assert percentile([], 0.5) is None


def test_a_manual_run_fills_no_occurrence_and_must_be_executed() -> None:
    """A manual Run beside the series is no duplicate, nor unexpected; unexecuted, it fails."""
    cron = [_row(1, 1_000, 1_010), _row(1, 2_000, 2_005)]
    manual = _row(1, 1_000, 1_000, kind="manual")  # triggered at an occurrence's millisecond
    counts = count_history([*cron, manual], {(1, 1_000), (1, 2_000)}, end_ms=2_000)
    assert (counts.duplicates, counts.unexpected, counts.admitted) == (0, 0, 2)
    assert (counts.manual, counts.manual_executed) == (1, 1)
    assert counts.exact
    queued = _row(1, 1_500, 1_500, kind="manual", events=2, succeeded=0, live=1)
    pending = count_history([*cron, queued], {(1, 1_000), (1, 2_000)}, end_ms=2_000)
    assert (pending.manual, pending.manual_executed) == (1, 0)
    assert not pending.exact


def test_a_run_skipped_for_overlap_is_accounted_not_executed() -> None:
    """1 run : 1 skipped attempt : 3 events fills its occurrence; any other unexecuted run fails."""
    skipped = _row(1, 2_000, 2_001, events=3, succeeded=0, skipped=1)
    counts = count_history([_row(1, 1_000, 1_010), skipped], {(1, 1_000), (1, 2_000)}, 2_000)
    assert (counts.admitted, counts.executed, counts.overlap_skipped) == (2, 1, 1)
    assert counts.not_executed == 0
    assert counts.exact
    # Skipped, but without its `attempt.skipped` event: not the shape the policy writes.
    odd = _row(1, 2_000, 2_001, events=2, succeeded=0, skipped=1)
    broken = count_history([_row(1, 1_000, 1_010), odd], {(1, 1_000), (1, 2_000)}, 2_000)
    assert (broken.overlap_skipped, broken.not_executed) == (0, 1)
    assert not broken.exact
