"""Property tests of the misfire decision against a plain model built on enumerated occurrences."""

from __future__ import annotations

from dataclasses import dataclass

from claims import observed_claim
from cron_reference import ReferenceCron
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ql3_runtime_core import (
    MISFIRE_GRACE_MS_MAX,
    ClusterScheduleClaim,
    MisfirePolicy,
    ScheduleDecision,
    ScheduleState,
    checked_commit,
    load_timezone,
    next_occurrence_ms,
    resolve_cluster_schedule_decision,
)

# (expression, longest outage to draw in ms): keeps the model's naive enumeration short.
SCHEDULES = (
    ("* * * * * *", 15 * 60_000),
    ("*/7 * * * * *", 90 * 60_000),
    ("*/5 * * * *", 2 * 86_400_000),
    ("*/30 * * * *", 10 * 86_400_000),
    ("0 * * * *", 20 * 86_400_000),
    ("30 1 * * *", 300 * 86_400_000),
    ("15 30 2 * * *", 300 * 86_400_000),
    ("0 0 * * 0", 700 * 86_400_000),
)
ZONES = ("UTC", "America/New_York", "Australia/Lord_Howe", "Europe/London")
# Around New York / London / Lord Howe changes of 2026 and a plain day.
ANCHORS = (
    1_772_953_200_000,
    1_793_511_000_000,
    1_774_746_000_000,
    1_775_313_000_000,
    1_767_225_600_000,
)
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Scenario:
    """One drawn claim and budget."""

    claim: ClusterScheduleClaim
    budget: int


# Outages short enough for the reference walker, which steps through every second or minute.
WALKED = (
    ("* * * * * *", 20 * 60_000),
    ("*/7 * * * * *", 60 * 60_000),
    ("*/5 * * * *", 2 * 86_400_000),
    ("30 1 * * *", 3 * 86_400_000),
    ("0 2 * * *", 3 * 86_400_000),
)


@st.composite
def scenarios(
    draw: st.DrawFn,
    schedules: tuple[tuple[str, int], ...] = SCHEDULES,
    policies: tuple[MisfirePolicy, ...] = tuple(MisfirePolicy),
    *,
    outages_only: bool = False,
) -> Scenario:
    """Draw a schedule, zone, cursor (on or between occurrences), observation, window and policy."""
    expression, longest = draw(st.sampled_from(schedules))
    zone = draw(st.sampled_from(ZONES))
    cursor = draw(st.sampled_from(ANCHORS)) + draw(st.integers(-86_400_000, 86_400_000))
    if draw(st.booleans()):
        cursor = next_occurrence_ms(expression, zone, cursor - 1)
    shortest = longest // 4 if outages_only else -60_000
    observed = cursor + draw(st.integers(shortest, longest))
    start = draw(st.none() | st.integers(cursor - longest, observed + longest))
    end = draw(st.none() | st.integers(max(cursor, start or cursor), observed + longest))
    claim = observed_claim(
        observed,
        cursor,
        cron=expression,
        timezone=zone,
        misfire_policy=draw(st.sampled_from(policies)),
        misfire_grace_ms=draw(
            # A definition's grace is at most MISFIRE_GRACE_MS_MAX, however long the outage.
            st.sampled_from([0, 1_000, 60_000, 3_600_000])
            | st.integers(0, min(longest, MISFIRE_GRACE_MS_MAX))
        ),
        start_at_ms=start,
        end_at_ms=end,
    )
    budget = draw(st.sampled_from([0, 1, 2, 3, 16, 256]) | st.integers(0, 40))
    return Scenario(claim, budget)


def due_occurrences(claim: ClusterScheduleClaim) -> tuple[list[int], int]:
    """Enumerate every due occurrence and return them with the first occurrence after them."""
    definition = claim.definition
    low = max(claim.next_due_at_ms, definition.start_at_ms or claim.next_due_at_ms)
    high = claim.claim_acquired_at_ms
    if definition.end_at_ms is not None:
        high = min(high, definition.end_at_ms)
    due: list[int] = []
    current = next_occurrence_ms(definition.cron, definition.timezone, low - 1)
    while current <= high:
        due.append(current)
        current = next_occurrence_ms(definition.cron, definition.timezone, current)
    return due, current


def model(claim: ClusterScheduleClaim, budget: int) -> ScheduleDecision:
    """Compute the decision DESIGN §4 describes, naively, from the full list of due occurrences."""
    definition = claim.definition
    observed = claim.claim_acquired_at_ms
    due, after_due = due_occurrences(claim)
    missed = [t for t in due if observed - t > definition.misfire_grace_ms]
    on_time = [t for t in due if observed - t <= definition.misfire_grace_ms]
    skipped_list: list[int] = []
    if budget == 0:
        admitted: list[int] = []
        decided: list[int] = []
        cursor: int = claim.next_due_at_ms if due or not _past_end(claim, after_due) else after_due
    else:
        if definition.misfire_policy is MisfirePolicy.CATCH_UP:
            admitted = due[:budget]
            decided = admitted
        elif definition.misfire_policy is MisfirePolicy.FIRE_ONCE:
            admitted = ([missed[-1]] if missed else []) + on_time
            admitted = admitted[:budget]
            decided = missed + on_time[: budget - (1 if missed else 0)]
            skipped_list = missed[:-1]
        else:
            admitted = on_time[:budget]
            decided = missed + admitted
            skipped_list = missed
        undecided = [t for t in due if t not in set(decided)]
        cursor = undecided[0] if undecided else after_due
    exhausted = _past_end(claim, cursor)
    return ScheduleDecision(
        schedule_id=claim.schedule_id,
        occurrences=tuple(admitted),
        next_due_at_ms=None if exhausted else cursor,
        state=ScheduleState.EXHAUSTED if exhausted else ScheduleState.ACTIVE,
        observed_at_ms=observed,
        skipped=len(skipped_list),
        skipped_first_ms=skipped_list[0] if skipped_list else None,
        skipped_last_ms=skipped_list[-1] if skipped_list else None,
    )


def _past_end(claim: ClusterScheduleClaim, occurrence: int) -> bool:
    end = claim.definition.end_at_ms
    return end is not None and occurrence > end


@_SETTINGS
@given(scenarios())
def test_decision_equals_the_naive_model(scenario: Scenario) -> None:
    """The jumping decision equals the naive one that enumerates every due occurrence."""
    decision = resolve_cluster_schedule_decision(scenario.claim, scenario.budget)
    assert decision == model(scenario.claim, scenario.budget)


@_SETTINGS
@given(scenarios())
def test_decision_is_committable_and_accounts_for_every_due_occurrence(scenario: Scenario) -> None:
    """A decision passes normalization, never moves the cursor back, and drops nothing silently."""
    claim, budget = scenario.claim, scenario.budget
    decision = resolve_cluster_schedule_decision(claim, budget)
    checked_commit(claim, decision, budget)
    assert decision.observed_at_ms == claim.claim_acquired_at_ms
    assert decision.next_due_at_ms is None or decision.next_due_at_ms >= claim.next_due_at_ms
    due, _ = due_occurrences(claim)
    cursor = decision.next_due_at_ms
    still_due = [t for t in due if cursor is not None and t >= cursor]
    assert set(decision.occurrences) <= set(due)
    assert len(decision.occurrences) + decision.skipped + len(still_due) == len(due)
    if budget == 0:
        assert decision.occurrences == ()
        assert cursor in {claim.next_due_at_ms, None}


def walked_occurrences(claim: ClusterScheduleClaim, low_ms: int, high_ms: int) -> list[int]:
    """Return the reference walker's occurrences in `[low_ms, high_ms)`, as epoch ms."""
    definition = claim.definition
    reference = ReferenceCron(definition.cron)
    zone = load_timezone(definition.timezone)
    found = reference.occurrences(zone, -(-low_ms // 1_000), (high_ms - 1) // 1_000)
    return [instant * 1_000 for instant in found]


@_SETTINGS
@given(scenarios(WALKED, (MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP), outages_only=True))
def test_every_passed_occurrence_is_admitted_or_skipped_by_the_reference_walk(
    scenario: Scenario,
) -> None:
    """From the old cursor to the new one, each occurrence is admitted or in the skipped range.

    The occurrences are enumerated by the brute-force reference walker, which shares no code
    with the engine, and the skipped count must equal how many of them the range holds.
    """
    claim, budget = scenario.claim, scenario.budget
    decision = resolve_cluster_schedule_decision(claim, budget)
    checked_commit(claim, decision, budget)
    definition = claim.definition
    low = max(claim.next_due_at_ms, definition.start_at_ms or claim.next_due_at_ms)
    if decision.next_due_at_ms is not None:
        high = decision.next_due_at_ms
    else:
        assert definition.end_at_ms is not None
        high = definition.end_at_ms + 1
    passed = walked_occurrences(claim, low, high)
    admitted = set(decision.occurrences)
    first, last = decision.skipped_first_ms, decision.skipped_last_ms
    skipped = [t for t in passed if first is not None and last is not None and first <= t <= last]
    for occurrence in passed:
        assert (occurrence in admitted) != (occurrence in skipped), occurrence
    assert admitted <= set(passed)
    assert len(skipped) == decision.skipped
    assert len(admitted) + len(skipped) == len(passed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule=st.sampled_from(SCHEDULES),
    zone=st.sampled_from(ZONES),
    anchor=st.sampled_from(ANCHORS),
    policy=st.sampled_from(list(MisfirePolicy)),
    grace=st.sampled_from([0, 60_000, 3_600_000]),
    budget=st.integers(0, 8),
    fractions=st.lists(st.floats(0, 1), min_size=1, max_size=8),
)
def test_cycles_never_move_back_and_admit_each_occurrence_at_most_once(
    *,
    schedule: tuple[str, int],
    zone: str,
    anchor: int,
    policy: MisfirePolicy,
    grace: int,
    budget: int,
    fractions: list[float],
) -> None:
    """Chained cycles: the cursor is monotone, nothing is admitted twice or lost."""
    expression, longest = schedule
    start = next_occurrence_ms(expression, zone, anchor - 1)
    cursor: int | None = start
    observed = start
    admitted: list[int] = []
    skipped = 0
    for fraction in fractions:
        observed += int(fraction * longest / len(fractions))
        assert cursor is not None
        claim = observed_claim(
            observed,
            cursor,
            cron=expression,
            timezone=zone,
            misfire_policy=policy,
            misfire_grace_ms=grace,
        )
        decision = resolve_cluster_schedule_decision(claim, budget)
        assert decision.next_due_at_ms is not None
        assert decision.next_due_at_ms >= cursor
        cursor = decision.next_due_at_ms
        admitted.extend(decision.occurrences)
        skipped += decision.skipped
    assert len(admitted) == len(set(admitted))
    assert admitted == sorted(admitted)
    assert cursor is not None
    remaining, _ = due_occurrences(observed_claim(observed, cursor, cron=expression, timezone=zone))
    total, _ = due_occurrences(observed_claim(observed, start, cron=expression, timezone=zone))
    assert len(admitted) + skipped + len(remaining) == len(total)
