"""The commit check (DESIGN §4): the last check before the fenced commit (DESIGN §5).

A decision reaches the repository only as a `ClaimCommit`, and the only way to build one is
`checked_commit`, which refuses anything a correct decision could not have produced. It changes
nothing it is given (the name it had, `normalize_commit`, promised otherwise): it checks, then
pairs the claim with its decision and names the zone rules version the decision was made with,
which the commit compares with the recorded one: a decision made under rules that are no longer
recorded is never written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ._contracts import ClusterScheduleClaim, MisfirePolicy, ScheduleState
from ._cron import count_occurrences_ms, next_occurrence_ms
from ._decision import ScheduleDecision
from ._errors import InvalidDecisionError
from ._zones import wheel_zone_rules

if TYPE_CHECKING:
    from ._zones import ZoneRules

__all__ = ["ClaimCommit", "checked_commit"]


class ClaimCommit(BaseModel):
    """A claim paired with the decision made from it, checked by `checked_commit`.

    `zone_rules_version` names the zone rules the decision was computed with; the commit writes
    nothing unless it is still the recorded version.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: ClusterScheduleClaim
    decision: ScheduleDecision
    zone_rules_version: str


def checked_commit(
    claim: ClusterScheduleClaim,
    decision: ScheduleDecision,
    budget: int,
    *,
    rules: ZoneRules | None = None,
) -> ClaimCommit:
    """Check `decision` against `claim` and return the pair ready to commit.

    `rules` must be the zone rules the decision was made with (default: this node's tzdata
    wheel): the checks compute with them and the commit is fenced on their version.

    Raises:
        InvalidDecisionError: the decision observed another time than the claim's acquired time,
            belongs to another schedule, moves the cursor backwards, admits an occurrence later
            than the observation or earlier than the cursor, repeats or disorders occurrences,
            or admits more than `budget`; or its skipped range is not the exact, contiguous run
            of missed occurrences from the first due one, before every admitted occurrence and
            the new cursor, with `skipped` counting them (catch_up never skips).

    """
    acquired = claim.claim_acquired_at_ms
    if decision.observed_at_ms != acquired:
        raise InvalidDecisionError(
            "observed_at_ms",
            f"{decision.observed_at_ms} differs from claim_acquired_at_ms={acquired}",
        )
    if decision.schedule_id != claim.schedule_id:
        raise InvalidDecisionError(
            "schedule_id",
            f"decision is for schedule {decision.schedule_id}, claim for {claim.schedule_id}",
        )
    rules = rules or wheel_zone_rules()
    _check_occurrences(claim, decision, budget)
    _check_cursor(claim, decision)
    _check_skipped(claim, decision, rules)
    return ClaimCommit(claim=claim, decision=decision, zone_rules_version=rules.version)


def _check_occurrences(
    claim: ClusterScheduleClaim, decision: ScheduleDecision, budget: int
) -> None:
    occurrences = decision.occurrences
    if len(occurrences) > budget:
        raise InvalidDecisionError(
            "occurrences", f"{len(occurrences)} occurrences exceed the budget of {budget}"
        )
    if len(set(occurrences)) != len(occurrences):
        raise InvalidDecisionError("occurrences", f"duplicate occurrences in {list(occurrences)}")
    if list(occurrences) != sorted(occurrences):
        raise InvalidDecisionError("occurrences", f"not oldest first: {list(occurrences)}")
    for occurrence in occurrences:
        if occurrence > claim.claim_acquired_at_ms:
            raise InvalidDecisionError(
                "occurrences",
                f"occurrence {occurrence} is later than the observation"
                f" {claim.claim_acquired_at_ms}",
            )
        if occurrence < claim.next_due_at_ms:
            raise InvalidDecisionError(
                "occurrences",
                f"occurrence {occurrence} is earlier than the cursor {claim.next_due_at_ms}",
            )


def _check_cursor(claim: ClusterScheduleClaim, decision: ScheduleDecision) -> None:
    cursor = decision.next_due_at_ms
    if cursor is None:
        if decision.state is not ScheduleState.EXHAUSTED:
            raise InvalidDecisionError(
                "next_due_at_ms", f"no cursor but state is {decision.state.value!r}"
            )
        return
    if cursor < claim.next_due_at_ms:
        raise InvalidDecisionError(
            "next_due_at_ms",
            f"cursor moves backwards from {claim.next_due_at_ms} to {cursor}",
        )
    if decision.occurrences and cursor <= decision.occurrences[-1]:
        raise InvalidDecisionError(
            "next_due_at_ms",
            f"cursor {cursor} does not pass the last admitted occurrence"
            f" {decision.occurrences[-1]}",
        )
    if decision.state is not ScheduleState.ACTIVE:
        raise InvalidDecisionError(
            "state", f"a cursor is set but state is {decision.state.value!r}"
        )


def _check_skipped(
    claim: ClusterScheduleClaim, decision: ScheduleDecision, rules: ZoneRules
) -> None:
    """Refuse a skipped range the commit could not record as the exact truth (DESIGN §4, §7).

    The commit writes the range as the durable record of what the cursor passed without
    admitting, and `ql3 verify` accounts every occurrence with it; so it must be exact here.
    Cron math runs only when something was skipped (after an outage), never on the hot path.
    """
    first, last, count = decision.skipped_first_ms, decision.skipped_last_ms, decision.skipped
    if count == 0 and first is None and last is None:
        return
    if count < 1 or first is None or last is None:
        raise InvalidDecisionError(
            "skipped",
            f"skipped={count} needs both ends of its range, got first={first} last={last}"
            " (and a count of at least 1 when a range is given)",
        )
    definition = claim.definition
    if definition.misfire_policy is MisfirePolicy.CATCH_UP:
        raise InvalidDecisionError("skipped", f"catch_up admits every occurrence, {count} skipped")
    _check_skipped_bounds(claim, decision, first, last, rules)
    exact = count_occurrences_ms(definition.cron, definition.timezone, first, last, rules=rules)
    if exact != count:
        raise InvalidDecisionError(
            "skipped", f"{count} skipped, but {exact} occurrences lie in [{first}, {last}]"
        )


def _check_skipped_bounds(
    claim: ClusterScheduleClaim,
    decision: ScheduleDecision,
    first: int,
    last: int,
    rules: ZoneRules,
) -> None:
    definition = claim.definition
    cursor = claim.next_due_at_ms
    low = cursor if definition.start_at_ms is None else max(cursor, definition.start_at_ms)
    if next_occurrence_ms(definition.cron, definition.timezone, low - 1, rules=rules) != first:
        raise InvalidDecisionError(
            "skipped_first_ms", f"{first} is not the first due occurrence at or after {low}"
        )
    if last < first or (
        next_occurrence_ms(definition.cron, definition.timezone, last - 1, rules=rules) != last
    ):
        raise InvalidDecisionError(
            "skipped_last_ms", f"{last} is not an occurrence at or after the first skipped {first}"
        )
    missed_before = claim.claim_acquired_at_ms - definition.misfire_grace_ms
    if last >= missed_before:
        raise InvalidDecisionError(
            "skipped_last_ms",
            f"{last} was not missed at the observation {claim.claim_acquired_at_ms}"
            f" (grace {definition.misfire_grace_ms} ms)",
        )
    if definition.end_at_ms is not None and last > definition.end_at_ms:
        raise InvalidDecisionError(
            "skipped_last_ms", f"{last} is after end_at_ms={definition.end_at_ms}"
        )
    following = [*decision.occurrences[:1], decision.next_due_at_ms]
    if any(after is not None and after <= last for after in following):
        raise InvalidDecisionError(
            "skipped_last_ms",
            f"{last} is not before the admitted occurrences and the new cursor {following}",
        )
