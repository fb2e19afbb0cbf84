"""The commit check (DESIGN §4): a decision is bound to its claim's observation and cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from claims import make_claim, make_decision
from pydantic import ValidationError
from ql3_runtime_core import (
    ClaimCommit,
    InvalidDecisionError,
    ScheduleState,
    checked_commit,
    resolve_cluster_schedule_decision,
)

if TYPE_CHECKING:
    from ql3_runtime_core import ClusterScheduleClaim, ScheduleDecision


def test_resolved_decision_is_accepted() -> None:
    """A decision computed from the claim normalizes into a ClaimCommit holding both."""
    claim = make_claim()
    decision = resolve_cluster_schedule_decision(claim, 16)
    commit = checked_commit(claim, decision, 16)
    assert isinstance(commit, ClaimCommit)
    assert (commit.claim, commit.decision) == (claim, decision)


def test_empty_decision_with_unchanged_cursor_is_accepted() -> None:
    """Deciding nothing and keeping the cursor is a valid commit."""
    claim = make_claim()
    decision = make_decision(claim, occurrences=(), next_due_at_ms=claim.next_due_at_ms)
    assert checked_commit(claim, decision, 0).decision == decision


def test_exhausted_decision_is_accepted() -> None:
    """An exhausted decision has no cursor."""
    claim = make_claim()
    decision = make_decision(claim, next_due_at_ms=None, state=ScheduleState.EXHAUSTED)
    assert checked_commit(claim, decision, 1).decision.next_due_at_ms is None


@pytest.mark.parametrize("observed", [999_999, 1_000_001, 0, 1_030_000])
def test_observation_other_than_acquired_time_is_refused(observed: int) -> None:
    """observed_at_ms must equal the claim's claim_acquired_at_ms exactly."""
    claim = make_claim()
    with pytest.raises(InvalidDecisionError, match="observed_at_ms") as caught:
        checked_commit(claim, make_decision(claim, observed_at_ms=observed), 16)
    assert caught.value.field == "observed_at_ms"
    assert str(observed) in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule_id": 8}, "schedule_id"),
        ({"next_due_at_ms": 899_999, "occurrences": ()}, "next_due_at_ms"),
        ({"occurrences": (900_000, 1_000_001), "next_due_at_ms": 1_200_000}, "occurrences"),
        ({"occurrences": (900_000, 900_000)}, "occurrences"),
        ({"occurrences": (960_000, 900_000)}, "occurrences"),
        ({"occurrences": (899_000,)}, "occurrences"),
        ({"occurrences": (900_000, 960_000), "next_due_at_ms": 960_000}, "next_due_at_ms"),
        ({"next_due_at_ms": None}, "next_due_at_ms"),
        ({"state": ScheduleState.EXHAUSTED}, "state"),
        ({"state": ScheduleState.PAUSED}, "state"),
    ],
    ids=[
        "other-schedule",
        "cursor-backwards",
        "later-than-observation",
        "duplicate",
        "not-oldest-first",
        "before-cursor",
        "cursor-not-past-last",
        "no-cursor-but-active",
        "cursor-but-exhausted",
        "cursor-but-paused",
    ],
)
def test_inconsistent_decision_is_refused(change: dict[str, Any], field: str) -> None:
    """Each inconsistency is refused with an InvalidDecisionError naming the field."""
    claim = make_claim()
    with pytest.raises(InvalidDecisionError) as caught:
        checked_commit(claim, make_decision(claim, **change), 16)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_more_occurrences_than_budget_is_refused() -> None:
    """A decision admitting more than the budget is refused."""
    claim = make_claim()
    decision = make_decision(claim, occurrences=(900_000, 960_000), next_due_at_ms=1_020_000)
    assert checked_commit(claim, decision, 2).decision == decision
    with pytest.raises(InvalidDecisionError, match="budget of 1"):
        checked_commit(claim, decision, 1)


def test_occurrence_equal_to_observation_is_accepted() -> None:
    """An occurrence exactly at the acquired time is due and may be admitted."""
    claim = make_claim()
    decision = make_decision(claim, occurrences=(1_000_000,), next_due_at_ms=1_000_001)
    assert checked_commit(claim, decision, 1).decision.occurrences == (1_000_000,)


def _skip_claim(**definition: Any) -> ClusterScheduleClaim:
    """Build a `*/5` skip claim, cursor 300 000, observed at 1 000 000: 300k-900k all missed."""
    return make_claim(
        next_due_at_ms=300_000,
        definition={"misfire_policy": "skip", "misfire_grace_ms": 60_000, **definition},
    )


def _skip_decision(claim: ClusterScheduleClaim, **change: Any) -> ScheduleDecision:
    payload: dict[str, Any] = {
        "occurrences": (),
        "next_due_at_ms": 1_200_000,
        "skipped": 3,
        "skipped_first_ms": 300_000,
        "skipped_last_ms": 900_000,
    }
    payload.update(change)
    return make_decision(claim, **payload)


def test_exact_skipped_range_is_accepted() -> None:
    """A range from the first due occurrence to the latest missed one, counted exactly, passes."""
    claim = _skip_claim()
    decision = _skip_decision(claim)
    assert resolve_cluster_schedule_decision(claim, 16) == decision
    assert checked_commit(claim, decision, 16).decision == decision


@pytest.mark.parametrize(
    ("definition", "change", "field"),
    [
        ({}, {"skipped_first_ms": None}, "skipped"),
        ({}, {"skipped_last_ms": None}, "skipped"),
        ({}, {"skipped": 0}, "skipped"),
        ({}, {"skipped": -1}, "skipped"),
        ({}, {"skipped": 2}, "skipped"),
        ({"misfire_policy": "catch_up"}, {}, "skipped"),
        ({}, {"skipped_first_ms": 600_000, "skipped": 2}, "skipped_first_ms"),
        ({}, {"skipped_first_ms": 0, "skipped": 4}, "skipped_first_ms"),
        ({}, {"skipped_last_ms": 899_000}, "skipped_last_ms"),
        ({}, {"skipped_last_ms": 299_000, "skipped": 1}, "skipped_last_ms"),
        ({"misfire_grace_ms": 100_000}, {}, "skipped_last_ms"),
        ({}, {"next_due_at_ms": 900_000}, "skipped_last_ms"),
        ({}, {"occurrences": (900_000,)}, "skipped_last_ms"),
        ({"end_at_ms": 600_000}, {"next_due_at_ms": None, "state": "exhausted"}, "skipped_last_ms"),
    ],
    ids=[
        "count-without-first",
        "count-without-last",
        "range-without-count",
        "negative-count",
        "wrong-count",
        "catch-up-skips",
        "not-from-first-due",
        "before-the-cursor",
        "last-not-an-occurrence",
        "last-before-first",
        "last-on-time",
        "last-at-new-cursor",
        "last-is-admitted",
        "after-end",
    ],
)
def test_inconsistent_skipped_range_is_refused(
    definition: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    """A skipped range that is not the exact run of missed occurrences is refused by name."""
    claim = _skip_claim(**definition)
    with pytest.raises(InvalidDecisionError) as caught:
        checked_commit(claim, _skip_decision(claim, **change), 16)
    assert caught.value.field == field, str(caught.value)


def test_a_checked_commit_cannot_be_edited() -> None:
    """A checked commit is frozen: what the repository writes is what was checked."""
    claim = make_claim()
    commit = checked_commit(claim, resolve_cluster_schedule_decision(claim, 16), 16)
    with pytest.raises(ValidationError, match="frozen"):
        commit.zone_rules_version = "other"  # type: ignore[misc]
    assert commit.claim == claim


def test_the_zone_rules_are_passed_by_name_only() -> None:
    """`rules` is keyword-only: a fourth positional argument cannot be mistaken for it."""
    claim = make_claim()
    decision = resolve_cluster_schedule_decision(claim, 16)
    with pytest.raises(TypeError, match="positional argument"):
        checked_commit(claim, decision, 16, None)  # type: ignore[call-arg]
    commit = checked_commit(claim=claim, decision=decision, budget=16, rules=None)
    assert commit.decision == decision


def test_a_cursor_not_past_the_last_occurrence_names_that_occurrence() -> None:
    """The refusal names the last admitted occurrence the cursor fails to pass, not another."""
    claim = make_claim()
    decision = make_decision(claim, occurrences=(900_000, 960_000), next_due_at_ms=960_000)
    with pytest.raises(InvalidDecisionError) as caught:
        checked_commit(claim, decision, 16)
    assert str(caught.value).endswith(
        "cursor 960000 does not pass the last admitted occurrence 960000"
    )


def test_a_skipped_range_with_a_zero_count_is_refused_for_its_count() -> None:
    """A range given with `skipped=0` is refused as such, before any cron arithmetic."""
    claim = _skip_claim()
    with pytest.raises(InvalidDecisionError, match="a count of at least 1 when a range is given"):
        checked_commit(claim, _skip_decision(claim, skipped=0), 16)
