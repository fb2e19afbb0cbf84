"""Misfire decision (DESIGN §4): each policy on time, missed and with a budget-limited backlog."""

from __future__ import annotations

from typing import Any

import pytest
from claims import observed_claim
from pydantic import ValidationError
from ql3_runtime_core import (
    ClusterScheduleClaim,
    InvalidArgumentError,
    MisfirePolicy,
    ScheduleState,
    checked_commit,
    resolve_cluster_schedule_decision,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a multiple of every interval used here
MINUTE = 60_000
FIVE = 5 * MINUTE
HOUR = 60 * MINUTE


def claim_at(
    observed: int,
    *,
    cursor: int = T0,
    policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE,
    grace: int = MINUTE,
    cron: str = "*/5 * * * *",
    **definition: Any,
) -> ClusterScheduleClaim:
    """Build a claim acquired at `observed` with cursor `cursor` for a UTC schedule."""
    return observed_claim(
        observed, cursor, cron=cron, misfire_policy=policy, misfire_grace_ms=grace, **definition
    )


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_on_time_occurrence_is_admitted_by_every_policy(policy: MisfirePolicy) -> None:
    """An occurrence within the grace is admitted whatever the policy, and the cursor moves on."""
    claim = claim_at(T0 + 10_000, policy=policy)
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert decision.occurrences == (T0,)
    assert decision.next_due_at_ms == T0 + FIVE
    assert (decision.state, decision.skipped, decision.observed_at_ms) == (
        ScheduleState.ACTIVE,
        0,
        T0 + 10_000,
    )
    checked_commit(claim, decision, 16)


def test_occurrence_exactly_at_grace_is_on_time() -> None:
    """Obs - t == grace is on time (skip still admits it); one millisecond more is missed."""
    on_time = resolve_cluster_schedule_decision(
        claim_at(T0 + MINUTE, policy=MisfirePolicy.SKIP), 16
    )
    missed = resolve_cluster_schedule_decision(
        claim_at(T0 + MINUTE + 1, policy=MisfirePolicy.SKIP), 16
    )
    assert (on_time.occurrences, on_time.skipped) == ((T0,), 0)
    assert (on_time.skipped_first_ms, on_time.skipped_last_ms) == (None, None)
    assert (missed.occurrences, missed.skipped) == ((), 1)
    assert (missed.skipped_first_ms, missed.skipped_last_ms) == (T0, T0)
    assert missed.next_due_at_ms == T0 + FIVE


@pytest.mark.parametrize(
    ("policy", "admitted", "skipped", "skipped_range"),
    [
        (
            MisfirePolicy.FIRE_ONCE,
            (T0 + 3 * HOUR - FIVE, T0 + 3 * HOUR),
            35,
            (T0, T0 + 3 * HOUR - 2 * FIVE),
        ),
        (MisfirePolicy.SKIP, (T0 + 3 * HOUR,), 36, (T0, T0 + 3 * HOUR - FIVE)),
        (MisfirePolicy.CATCH_UP, tuple(range(T0, T0 + 3 * HOUR + 1, FIVE)), 0, (None, None)),
    ],
)
def test_missed_occurrences_follow_the_policy(
    policy: MisfirePolicy,
    admitted: tuple[int, ...],
    skipped: int,
    skipped_range: tuple[int | None, int | None],
) -> None:
    """After 3 h down, 36 missed and 1 on-time: fire_once admits 1+1, skip 0+1, catch_up all 37.

    The skipped ones form one range from the first due occurrence to the latest missed one
    (fire_once admits that one, so its range ends one occurrence earlier).
    """
    claim = claim_at(T0 + 3 * HOUR, policy=policy)
    decision = resolve_cluster_schedule_decision(claim, 256)
    assert decision.occurrences == admitted
    assert decision.skipped == skipped
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == skipped_range
    assert decision.next_due_at_ms == T0 + 3 * HOUR + FIVE
    assert len(decision.occurrences) + decision.skipped == 37
    checked_commit(claim, decision, 256)


def test_catch_up_backlog_beyond_budget_stays_due() -> None:
    """catch_up admits the oldest `budget` occurrences; the cursor is the first one left."""
    claim = claim_at(T0 + 3 * HOUR, policy=MisfirePolicy.CATCH_UP)
    decision = resolve_cluster_schedule_decision(claim, 10)
    assert decision.occurrences == tuple(range(T0, T0 + 10 * FIVE, FIVE))
    assert decision.next_due_at_ms == T0 + 10 * FIVE
    assert decision.skipped == 0
    follow_up = resolve_cluster_schedule_decision(
        claim_at(T0 + 3 * HOUR, cursor=T0 + 10 * FIVE, policy=MisfirePolicy.CATCH_UP), 10
    )
    assert follow_up.occurrences[0] == T0 + 10 * FIVE


def test_fire_once_backlog_beyond_budget_stays_due() -> None:
    """fire_once with budget 3: latest missed + 2 on-time admitted, other on-time ones stay due."""
    claim = claim_at(T0 + 3 * HOUR, grace=20 * MINUTE)
    decision = resolve_cluster_schedule_decision(claim, 3)
    end = T0 + 3 * HOUR
    assert decision.occurrences == (end - 25 * MINUTE, end - 20 * MINUTE, end - 15 * MINUTE)
    assert decision.skipped == 31
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == (T0, end - 30 * MINUTE)
    assert decision.next_due_at_ms == end - 10 * MINUTE


def test_skip_backlog_beyond_budget_stays_due() -> None:
    """Skip with budget 3: all missed skipped, 3 on-time admitted, the rest stays due."""
    claim = claim_at(T0 + 3 * HOUR, grace=20 * MINUTE, policy=MisfirePolicy.SKIP)
    decision = resolve_cluster_schedule_decision(claim, 3)
    end = T0 + 3 * HOUR
    assert decision.occurrences == (end - 20 * MINUTE, end - 15 * MINUTE, end - 10 * MINUTE)
    assert decision.skipped == 32
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == (T0, end - 25 * MINUTE)
    assert decision.next_due_at_ms == end - 5 * MINUTE


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_budget_zero_decides_nothing(policy: MisfirePolicy) -> None:
    """With no budget nothing is admitted or skipped and the cursor stays where it was."""
    claim = claim_at(T0 + 3 * HOUR, cursor=T0 - 1, policy=policy)
    decision = resolve_cluster_schedule_decision(claim, 0)
    assert (decision.occurrences, decision.skipped, decision.next_due_at_ms) == ((), 0, T0 - 1)
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == (None, None)
    assert decision.state is ScheduleState.ACTIVE


def test_negative_budget_is_refused() -> None:
    """A negative budget is an error naming `budget`."""
    with pytest.raises(InvalidArgumentError, match="budget: must be >= 0, got -1"):
        resolve_cluster_schedule_decision(claim_at(T0), -1)


def test_nothing_due_normalizes_cursor_to_next_occurrence() -> None:
    """A cursor between occurrences with none due moves to the next occurrence, never back."""
    claim = claim_at(T0 + MINUTE, cursor=T0 + 1)
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert (decision.occurrences, decision.next_due_at_ms) == ((), T0 + FIVE)


def test_cursor_between_occurrences_admits_from_the_next_one() -> None:
    """Occurrences before the cursor are never due, even if it is not itself an occurrence."""
    claim = claim_at(T0 + FIVE + 1_000, cursor=T0 + 1, policy=MisfirePolicy.CATCH_UP)
    assert resolve_cluster_schedule_decision(claim, 16).occurrences == (T0 + FIVE,)


def test_end_of_window_exhausts_the_schedule() -> None:
    """When the cursor passes end_at_ms the schedule is exhausted with no cursor."""
    claim = claim_at(T0 + HOUR, policy=MisfirePolicy.CATCH_UP, end_at_ms=T0 + 2 * FIVE)
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert decision.occurrences == (T0, T0 + FIVE, T0 + 2 * FIVE)
    assert (decision.next_due_at_ms, decision.state) == (None, ScheduleState.EXHAUSTED)
    checked_commit(claim, decision, 16)


def test_end_of_window_with_backlog_is_not_yet_exhausted() -> None:
    """A budget-limited backlog before end_at_ms keeps the schedule active."""
    claim = claim_at(T0 + HOUR, policy=MisfirePolicy.CATCH_UP, end_at_ms=T0 + 2 * FIVE)
    decision = resolve_cluster_schedule_decision(claim, 2)
    assert decision.occurrences == (T0, T0 + FIVE)
    assert (decision.next_due_at_ms, decision.state) == (T0 + 2 * FIVE, ScheduleState.ACTIVE)


def test_start_of_window_hides_earlier_occurrences() -> None:
    """Occurrences before start_at_ms are never due."""
    claim = claim_at(T0 + HOUR, policy=MisfirePolicy.CATCH_UP, start_at_ms=T0 + HOUR - FIVE)
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert decision.occurrences == (T0 + HOUR - FIVE, T0 + HOUR)


@pytest.mark.parametrize("policy", [MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP])
def test_week_long_outage_of_every_second_schedule_jumps(policy: MisfirePolicy) -> None:
    """After a week down, an every-second schedule admits only the tail and counts the rest."""
    week = 7 * 24 * HOUR
    claim = claim_at(T0 + week, policy=policy, cron="* * * * * *")
    decision = resolve_cluster_schedule_decision(claim, 256)
    on_time = tuple(range(T0 + week - MINUTE, T0 + week + 1, 1_000))
    latest_missed = (T0 + week - MINUTE - 1_000,)
    expected = latest_missed + on_time if policy is MisfirePolicy.FIRE_ONCE else on_time
    assert decision.occurrences == expected
    missed = week // 1_000 - 60
    assert decision.skipped == (missed - 1 if policy is MisfirePolicy.FIRE_ONCE else missed)
    last_skipped = latest_missed[0] - (1_000 if policy is MisfirePolicy.FIRE_ONCE else 0)
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == (T0, last_skipped)
    assert decision.next_due_at_ms == T0 + week + 1_000
    checked_commit(claim, decision, 256)


def test_catch_up_after_long_outage_walks_only_its_budget() -> None:
    """catch_up after a week down admits the oldest budget's worth and keeps the rest due."""
    claim = claim_at(T0 + 7 * 24 * HOUR, policy=MisfirePolicy.CATCH_UP, cron="* * * * * *")
    decision = resolve_cluster_schedule_decision(claim, 256)
    assert decision.occurrences == tuple(range(T0, T0 + 256_000, 1_000))
    assert decision.next_due_at_ms == T0 + 256_000


def test_fold_instances_of_interval_schedule_are_separate_occurrences() -> None:
    """Both New York 01:30 instances of `*/30` are due occurrences on fall-back day."""
    first_0130 = 1_793_511_000_000  # 2026-11-01T01:30:00-04:00
    claim = claim_at(
        first_0130 + HOUR,
        cursor=first_0130,
        policy=MisfirePolicy.CATCH_UP,
        cron="*/30 * * * *",
        timezone="America/New_York",
    )
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert decision.occurrences == (first_0130, first_0130 + 30 * MINUTE, first_0130 + HOUR)


def test_fixed_schedule_fires_once_across_the_fold() -> None:
    """`30 1 * * *` on New York fall-back day yields one occurrence, then the next day's."""
    first_0130 = 1_793_511_000_000
    claim = claim_at(
        first_0130 + 2 * HOUR,
        cursor=first_0130,
        policy=MisfirePolicy.CATCH_UP,
        cron="30 1 * * *",
        timezone="America/New_York",
    )
    decision = resolve_cluster_schedule_decision(claim, 16)
    assert decision.occurrences == (first_0130,)
    assert decision.next_due_at_ms == first_0130 + 25 * HOUR


def test_fire_once_with_a_single_missed_occurrence_skips_nothing() -> None:
    """fire_once admits the only missed occurrence, so nothing is skipped and there is no range."""
    decision = resolve_cluster_schedule_decision(claim_at(T0 + 2 * MINUTE), 16)
    assert (decision.occurrences, decision.skipped) == ((T0,), 0)
    assert (decision.skipped_first_ms, decision.skipped_last_ms) == (None, None)


def test_skipped_range_starts_at_the_window_start() -> None:
    """With start_at_ms after the cursor, the skipped range starts at the first due occurrence."""
    claim = claim_at(T0 + HOUR, policy=MisfirePolicy.SKIP, start_at_ms=T0 + 7 * MINUTE)
    decision = resolve_cluster_schedule_decision(claim, 16)
    skipped_range = (decision.skipped_first_ms, decision.skipped_last_ms)
    assert skipped_range == (T0 + 2 * FIVE, T0 + HOUR - FIVE)
    assert decision.skipped == 10
    checked_commit(claim, decision, 16)


def test_a_decision_cannot_be_edited_after_it_is_made() -> None:
    """A decision is frozen: what the commit normalizes is exactly what was decided."""
    decision = resolve_cluster_schedule_decision(claim_at(T0), 256)
    with pytest.raises(ValidationError, match="frozen"):
        decision.next_due_at_ms = T0  # type: ignore[misc]
    assert decision.occurrences == (T0,)


def test_the_zone_rules_are_passed_by_name_only() -> None:
    """`rules` is keyword-only: a third positional argument cannot be mistaken for it."""
    claim = claim_at(T0)
    with pytest.raises(TypeError, match="positional argument"):
        resolve_cluster_schedule_decision(claim, 16, None)  # type: ignore[call-arg]
    assert resolve_cluster_schedule_decision(claim=claim, budget=16).occurrences == (T0,)
