"""The cron and misfire decision (DESIGN §4): what a claim admits, and where its cursor goes.

The only observation is the claim's `claim_acquired_at_ms`, written by the database's
`clock_timestamp()`; `resolve_cluster_schedule_decision` takes no time argument (rule zero). Its
zone rules are an argument too: the ones the database recorded, which the repository loads, so
that a node's own tzdata never decides (the wheel's rules are only the default).

Terms, with `obs = claim_acquired_at_ms` and the cursor `next_due_at_ms` (the first undecided
occurrence): an occurrence `t` is *due* when `cursor <= t <= obs` (and `t <= end_at_ms`, and
`t >= start_at_ms`); it is *on time* when `obs - t <= misfire_grace_ms`, otherwise *missed*.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ._contracts import MisfirePolicy, ScheduleState
from ._cron import (
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
    occurrences_after_ms,
)
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._contracts import ClusterScheduleClaim, ScheduleDefinition
    from ._zones import ZoneRules

__all__ = ["ScheduleDecision", "resolve_cluster_schedule_decision"]


class ScheduleDecision(BaseModel):
    """What one claim decided: admitted occurrences (oldest first), new cursor and state.

    `observed_at_ms` is always the claim's `claim_acquired_at_ms` (DESIGN §4); the commit check
    refuses anything else. `skipped` counts the missed occurrences the policy chose not to admit,
    exactly (computed arithmetically, not by enumeration), so nothing is dropped silently.
    `skipped_first_ms` and `skipped_last_ms` bound them (None when `skipped` is 0): they are
    contiguous, every occurrence from the first due one up to the latest missed one (that one
    excluded under fire_once, which admits it), so one range describes them all and the commit
    records it durably (DESIGN §7). The cursor `next_due_at_ms` is the first undecided occurrence
    (None once the schedule is exhausted).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    occurrences: tuple[int, ...]
    next_due_at_ms: int | None
    state: ScheduleState
    observed_at_ms: int
    skipped: int = 0
    skipped_first_ms: int | None = None
    skipped_last_ms: int | None = None


def resolve_cluster_schedule_decision(
    claim: ClusterScheduleClaim,
    budget: int,
    *,
    rules: ZoneRules | None = None,
) -> ScheduleDecision:
    """Decide what `claim` admits with at most `budget` occurrences; it reads no clock.

    Occurrences are computed with `rules` (default: this node's tzdata wheel).

    fire_once admits the latest missed occurrence and every on-time one; skip admits only the
    on-time ones; catch_up admits every due one. Admissions are oldest first and at most
    `budget`; the cursor moves past exactly what was decided (admitted or skipped), so a backlog
    beyond the budget stays due for the next cycle. A budget of 0 decides nothing.

    Raises:
        InvalidArgumentError: `budget` is negative.

    """
    if budget < 0:
        raise InvalidArgumentError("budget", budget, "must be >= 0")
    zone = _Zone(claim.definition, rules)
    definition = claim.definition
    observed = claim.claim_acquired_at_ms
    cursor = claim.next_due_at_ms
    low = cursor if definition.start_at_ms is None else max(cursor, definition.start_at_ms)
    # next_occurrence_ms is strictly after its argument: `- 1` lets `low` itself be the first.
    first = zone.next(low - 1)
    if budget == 0:
        # Nothing decided: the cursor stays, unless no occurrence is left inside the window.
        if _past_end(definition, first):
            return _decision(claim, (), None)
        return _decision(claim, (), cursor)
    # Inclusive: an occurrence at exactly the observation is due, as the claim's `<=` found it.
    high = observed if definition.end_at_ms is None else min(observed, definition.end_at_ms)
    if definition.misfire_policy is MisfirePolicy.CATCH_UP:
        admitted, following = _take(zone, first, high, budget, [])
        return _decision(claim, admitted, following)
    return _resolve_dropping(claim, zone, budget, first, high)


class _Zone:
    """A definition's cron with the zone rules it is decided by."""

    __slots__ = ("cron", "rules", "timezone")

    def __init__(self, definition: ScheduleDefinition, rules: ZoneRules | None) -> None:
        self.cron = definition.cron
        self.timezone = definition.timezone
        self.rules = rules

    def next(self, after_ms: int) -> int:
        return next_occurrence_ms(self.cron, self.timezone, after_ms, rules=self.rules)

    def walk(self, after_ms: int) -> Iterator[int]:
        return occurrences_after_ms(self.cron, self.timezone, after_ms, rules=self.rules)

    def latest(self, at_or_before_ms: int, not_before_ms: int) -> int | None:
        return latest_occurrence_ms(
            self.cron, self.timezone, at_or_before_ms, not_before_ms, rules=self.rules
        )

    def count(self, first_ms: int, last_ms: int) -> int:
        return count_occurrences_ms(self.cron, self.timezone, first_ms, last_ms, rules=self.rules)


def _resolve_dropping(
    claim: ClusterScheduleClaim,
    zone: _Zone,
    budget: int,
    first: int,
    high: int,
) -> ScheduleDecision:
    """fire_once and skip: jump to the latest missed occurrence instead of walking the backlog."""
    definition = claim.definition
    # Missed means more than the grace before the observation: t < observed - grace, and in
    # whole milliseconds that is t <= observed - grace - 1.
    missed_high = min(high, claim.claim_acquired_at_ms - definition.misfire_grace_ms - 1)
    latest_missed = None
    if first <= missed_high:
        latest_missed = zone.latest(missed_high, first)
    admitted: list[int] = []
    skipped: tuple[int, int, int] | None = None
    on_time_from = first
    if latest_missed is not None:
        last_skipped: int | None = latest_missed
        if definition.misfire_policy is MisfirePolicy.FIRE_ONCE:
            # fire_once runs the latest missed one, so the skipped range ends just before it
            # (None when it was the only one missed: nothing skipped).
            admitted.append(latest_missed)
            last_skipped = zone.latest(latest_missed - 1, first)
        if last_skipped is not None:
            count = zone.count(first, last_skipped)
            skipped = (count, first, last_skipped)
        # Whatever follows the latest missed occurrence is still within its grace: on time.
        on_time_from = zone.next(latest_missed)
    occurrences, following = _take(zone, on_time_from, high, budget, admitted)
    return _decision(claim, occurrences, following, skipped=skipped)


def _take(
    zone: _Zone,
    start: int,
    high: int,
    budget: int,
    admitted: list[int],
) -> tuple[tuple[int, ...], int]:
    """Admit occurrences from `start` (an occurrence) up to `high` within the budget.

    Returns the admissions and the first occurrence left undecided. The first step asks
    `next_occurrence_ms`, whose answers are remembered (schedules sharing a cron step from the
    same instant: the one-occurrence claim of the steady state); a backlog then walks on with
    `occurrences_after_ms`, which yields the very same instants (a property test pins it) for a
    small fraction of the cost of asking again from each one (a catch-up claim admits up to the
    whole cycle budget, each occurrence a new question the memory cannot answer).
    """
    current = start
    if current > high or len(admitted) >= budget:
        return tuple(admitted), current
    admitted.append(current)
    current = zone.next(current)
    if current <= high and len(admitted) < budget:
        following = zone.walk(current)
        while current <= high and len(admitted) < budget:
            admitted.append(current)
            current = next(following)
    return tuple(admitted), current


def _past_end(definition: ScheduleDefinition, occurrence: int) -> bool:
    return definition.end_at_ms is not None and occurrence > definition.end_at_ms


def _decision(
    claim: ClusterScheduleClaim,
    occurrences: tuple[int, ...],
    following: int | None,
    *,
    skipped: tuple[int, int, int] | None = None,
) -> ScheduleDecision:
    """Build the decision; `skipped` is (count, first, last) of the skipped range, if any."""
    # No next occurrence at all (a date that never comes again) or one past end_at_ms: done.
    exhausted = following is None or _past_end(claim.definition, following)
    count, first, last = skipped if skipped is not None else (0, None, None)
    return ScheduleDecision(
        schedule_id=claim.schedule_id,
        occurrences=occurrences,
        next_due_at_ms=None if exhausted else following,
        state=ScheduleState.EXHAUSTED if exhausted else ScheduleState.ACTIVE,
        observed_at_ms=claim.claim_acquired_at_ms,
        skipped=count,
        skipped_first_ms=first,
        skipped_last_ms=last,
    )
