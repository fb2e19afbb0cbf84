"""The `skip_record` rule's check of each skip record's contents, as the accounting walk meets it.

A misfire record must hold exactly the missed occurrences its policy had to skip (its count,
its ends on occurrences, its policy, none on time at its claim, under skip nothing missed left
after it, under fire_once the occurrence after it admitted); a `zone_rules_changed` one is judged
by `_zones`; a `paused` one only by its shape here (its span: the `paused` rule, `_paused`).
Split from `_accounting`, which calls it for each record in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ql3_runtime_core import MisfirePolicy, count_occurrences_ms, next_occurrence_ms

from ._zones import ZONE_RULES_CHANGED, zone_skip_problems

if TYPE_CHECKING:
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

    from ._records import Schedule, Skip, Window
    from ._report import Findings

__all__ = ["PAUSED", "SkipJudge", "check_skip"]

# The reason of the records a resume writes for a paused span (migration 0010).
PAUSED = "paused"


class SkipJudge(Protocol):
    """What a skip record's check needs from the walk that meets it (`AccountingWalk`).

    Declared here, not imported: the walk calls this module, so this module naming the walk would
    make the two import each other.
    """

    findings: Findings
    schedule: Schedule
    # Which zone rules version followed which, and when (`VerifyZones.switches`).
    switches: dict[tuple[str, str], list[int]]

    def describe(self, start: int, end: int, nth: int | None, skip: Skip | None) -> str:
        """Name a run or a skip record, for a finding."""
        ...

    def await_run(self, occurrence_ms: int, what: str) -> None:
        """Report `what` unless a run at `occurrence_ms` is fed before anything later."""
        ...


def check_skip(owner: SkipJudge, window: Window, skip: Skip) -> None:
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
    if skip.reason == PAUSED:
        _check_paused_skip(owner, window, skip)
        return
    _check_misfire_skip(owner, window, skip)


def _check_paused_skip(owner: SkipJudge, window: Window, skip: Skip) -> None:
    """Check a `paused` record's shape; the `paused` rule judges it against its span.

    A resume passed these occurrences, not a claim or a policy: no policy or lateness applies,
    only that the range begins and ends on occurrences, counts them exactly and stays inside its
    revision's range.
    """
    definition, rules = window.definition, window.rules
    first, last = skip.first_skipped_ms, skip.last_skipped_ms
    problems: list[str] = []
    if not (_is_occurrence(definition, first, rules) and _is_occurrence(definition, last, rules)):
        problems.append("does not begin and end on occurrences")
    else:
        exact = count_occurrences_ms(definition.cron, definition.timezone, first, last, rules=rules)
        if exact != skip.skipped_count:
            problems.append(f"counts {skip.skipped_count} occurrences, its range holds {exact}")
    if last >= window.high:
        problems.append(f"reaches past the end of its revision's range ({window.high})")
    what = owner.describe(first, last, None, skip)
    for problem in problems:
        owner.findings.add("skip_record", owner.schedule.id, f"{what} {problem}")


def _check_misfire_skip(owner: SkipJudge, window: Window, skip: Skip) -> None:
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
