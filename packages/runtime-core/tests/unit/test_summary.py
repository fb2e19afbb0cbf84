"""Cycle summary (DESIGN §13): database times of the cycle's claims, never a node observation."""

from __future__ import annotations

from uuid import UUID

import pytest
from claims import TOKEN, make_claim
from ql3_runtime_core import (
    AdmittedRun,
    CommitOutcome,
    CommitStatus,
    InvalidArgumentError,
    summarize_cycle,
)


def run(schedule_id: int, scheduled_for_ms: int) -> AdmittedRun:
    """Build an admitted run for an outcome."""
    return AdmittedRun(
        run_id=scheduled_for_ms,
        attempt_id=scheduled_for_ms,
        schedule_id=schedule_id,
        task_id=1,
        scheduled_for_ms=scheduled_for_ms,
        created_at_ms=scheduled_for_ms + 5,
        owner_id="replica-a",
        claim_token=TOKEN,
    )


def test_empty_cycle_reports_no_acquired_times() -> None:
    """A cycle that claimed nothing reports None for first and last acquired time."""
    summary = summarize_cycle("replica-a", [], [])
    assert summary.first_claim_acquired_at_ms is None
    assert summary.last_claim_acquired_at_ms is None
    assert (summary.claims, summary.admitted, summary.committed) == (0, 0, 0)


def test_first_and_last_follow_claim_order_not_magnitude() -> None:
    """First/last are the first and last claims' acquired times in claim order."""
    claims = [
        make_claim(schedule_id=1, claim_acquired_at_ms=2_000_000, claim_expires_at_ms=2_030_000),
        make_claim(schedule_id=2, claim_acquired_at_ms=1_000_000, claim_expires_at_ms=1_030_000),
        make_claim(schedule_id=3, claim_acquired_at_ms=3_000_000, claim_expires_at_ms=3_030_000),
        make_claim(schedule_id=4, claim_acquired_at_ms=1_500_000, claim_expires_at_ms=1_530_000),
    ]
    summary = summarize_cycle("replica-a", claims, [])
    assert summary.first_claim_acquired_at_ms == 2_000_000
    assert summary.last_claim_acquired_at_ms == 1_500_000
    assert summary.claims == 4


def test_single_claim_is_both_first_and_last() -> None:
    """With one claim, first and last are its acquired time."""
    summary = summarize_cycle("replica-a", [make_claim()], [])
    assert summary.first_claim_acquired_at_ms == summary.last_claim_acquired_at_ms == 1_000_000


def test_outcomes_are_counted_by_status() -> None:
    """Committed and raced outcomes and admitted runs are counted; the cycle's own counts kept."""
    outcomes = [
        CommitOutcome(
            schedule_id=1,
            status=CommitStatus.COMMITTED,
            committed_at_ms=10,
            runs=(run(1, 100), run(1, 200)),
        ),
        CommitOutcome(schedule_id=2, status=CommitStatus.COMMITTED, committed_at_ms=10),
        CommitOutcome(schedule_id=3, status=CommitStatus.RACED),
        CommitOutcome(schedule_id=5, status=CommitStatus.UNCERTAIN),
    ]
    summary = summarize_cycle(
        "replica-a",
        [make_claim()],
        outcomes,
        uncertain=3,
        clock_regressed=1,
        skipped=7,
        serialization_retries=2,
        quarantined=4,
    )
    counts = (
        summary.admitted,
        summary.committed,
        summary.raced,
        summary.clock_regressed,
        summary.uncertain,
        summary.skipped,
        summary.serialization_retries,
        summary.quarantined,
    )
    assert counts == (2, 2, 1, 1, 3, 7, 2, 4)
    assert summary.owner_id == "replica-a"


def test_an_unsettled_outcome_must_be_counted_as_uncertain() -> None:
    """Fewer uncertain commits than outcomes left uncertain is refused, naming the count."""
    outcomes = [CommitOutcome(schedule_id=5, status=CommitStatus.UNCERTAIN)]
    with pytest.raises(InvalidArgumentError, match=r"^uncertain: .*1 outcomes left uncertain"):
        summarize_cycle("replica-a", [make_claim()], outcomes)
    assert summarize_cycle("replica-a", [make_claim()], outcomes, uncertain=1).uncertain == 1


@pytest.mark.parametrize(
    "name", ["uncertain", "clock_regressed", "skipped", "serialization_retries", "quarantined"]
)
def test_a_negative_count_is_refused(name: str) -> None:
    """Every count the cycle passes must be >= 0; the error names it."""
    with pytest.raises(InvalidArgumentError, match=rf"^{name}: must be >= 0, got -1"):
        summarize_cycle("replica-a", [], [], **{name: -1})


def test_summary_has_no_node_time_field() -> None:
    """The summary's only time fields are the claims' database acquired times."""
    time_fields = {
        name for name in summarize_cycle("a", [], []).model_dump() if name.endswith("_ms")
    }
    assert time_fields == {"first_claim_acquired_at_ms", "last_claim_acquired_at_ms"}
    assert UUID(int=0) != TOKEN
