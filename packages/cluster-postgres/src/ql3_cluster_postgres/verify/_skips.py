"""The `skip_record` rule's check of each skip record's contents, as the accounting walk meets it.

A misfire record must hold exactly the missed occurrences its policy had to skip (its count,
its ends on occurrences, its policy, none on time at its claim, under skip nothing missed left
after it, under fire_once the occurrence after it admitted); a `zone_rules_changed` one is judged
by `_verify_zones`. Split from `_verify_accounting`, which calls it for each record in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ql3_runtime_core import MisfirePolicy, count_occurrences_ms, next_occurrence_ms

from ._zones import ZONE_RULES_CHANGED, zone_skip_problems

if TYPE_CHECKING:
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

    from ._accounting import AccountingWalk
    from ._revisions import Window

__all__ = ["Skip", "check_skip"]


@dataclass(frozen=True)
class Skip:
    """One skip record, read by name (`verify_schedule_skips.sql` selects these columns).

    A `misfire` record has a policy and a claim; a `zone_rules_changed` one names both versions.
    """

    id: int
    schedule_id: int
    first_skipped_ms: int
    last_skipped_ms: int
    skipped_count: int
    reason: str
    misfire_policy: str | None
    claim_acquired_at_ms: int | None
    zone_rules_from: str | None
    zone_rules_to: str | None
    created_at_ms: int


def check_skip(owner: AccountingWalk, window: Window, skip: Skip) -> None:
    """Check that a skip record holds exactly the missed occurrences its policy had to skip."""
    if skip.reason == ZONE_RULES_CHANGED:
        what = owner.describe(skip.first_skipped_ms, skip.last_skipped_ms, None, skip)
        revision = window.revision
        for problem in zone_skip_problems(
            skip,
            window.definition,
            window.rules,
            revision_version=revision.zone_rules_version,
            window_high=window.high,
            switches=owner.switches,
        ):
            owner.findings.add("skip_record", owner.schedule.id, f"{what} {problem}")
        return
    _check_misfire_skip(owner, window, skip)


def _check_misfire_skip(owner: AccountingWalk, window: Window, skip: Skip) -> None:
    """Check a misfire record: the missed occurrences its policy had to skip, exactly."""
    definition, rules = window.definition, window.rules
    acquired = skip.claim_acquired_at_ms if skip.claim_acquired_at_ms is not None else 0
    first, last = skip.first_skipped_ms, skip.last_skipped_ms
    grace = definition.misfire_grace_ms
    problems: list[str] = []
    if skip.misfire_policy != definition.misfire_policy.value:
        problems.append(
            f"records policy {skip.misfire_policy!r}, its revision has"
            f" {definition.misfire_policy.value!r}"
        )
    if not (_is_occurrence(definition, first, rules) and _is_occurrence(definition, last, rules)):
        problems.append("does not begin and end on occurrences")
    else:
        exact = count_occurrences_ms(definition.cron, definition.timezone, first, last, rules=rules)
        if exact != skip.skipped_count:
            problems.append(f"counts {skip.skipped_count} occurrences, its range holds {exact}")
    if acquired - last <= grace:
        problems.append(f"skips {last}, on time at the claim {acquired} (grace {grace} ms)")
    if last >= window.high:
        problems.append(f"reaches past the end of its revision's range ({window.high})")
    following = _next(definition, last, rules)
    missed_too = acquired - following > grace and (
        definition.end_at_ms is None or following <= definition.end_at_ms
    )
    if definition.misfire_policy is MisfirePolicy.SKIP and missed_too:
        problems.append(f"stops before {following}, which that claim had missed too")
    what = owner.describe(first, last, None, skip)
    for problem in problems:
        owner.findings.add("skip_record", owner.schedule.id, f"{what} {problem}")
    if definition.misfire_policy is MisfirePolicy.FIRE_ONCE:
        # Runs come in occurrence order: whether one admits `following` is known once it passes.
        owner.await_run(
            following,
            f"{what} but fire_once admits the latest missed occurrence, {following}: no run",
        )


def _next(definition: ScheduleDefinition, after_ms: int, rules: ZoneRules) -> int:
    return next_occurrence_ms(definition.cron, definition.timezone, after_ms, rules=rules)


def _is_occurrence(definition: ScheduleDefinition, at_ms: int, rules: ZoneRules) -> bool:
    return _next(definition, at_ms - 1, rules) == at_ms
