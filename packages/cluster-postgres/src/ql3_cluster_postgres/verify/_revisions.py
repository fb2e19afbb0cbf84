"""The `revision` rule of `verify_history`: each schedule's revisions hold together.

The revisions (written by the admin with every creation and definition change, DESIGN §7) are
what the accounting walks; before it can, they must be readable, numbered 1..n with exactly the
last one live, the live one the schedule's own definition, each kept cursor continuing where the
previous revision ended, and each placed first cursor exactly the first occurrence after the
database time recorded with it and after every decided occurrence (no slack). Split from
`_accounting`, which walks what these checks let through.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING

from ql3_runtime_core import next_occurrence_ms

from ._records import Window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ScheduleDefinition, ZoneRules

    from ._records import Revision, Schedule
    from ._report import Findings

__all__ = ["MIGRATED", "check_revisions", "revision_windows"]

MIGRATED = "migrated"

# Revisions whose first cursor was placed from a database clock reading (the admin's, or the
# instant adopted zone rules took effect); the others keep a cursor.
_PLACED = frozenset({"created", "replaced", "zone_rules"})


def check_revisions(findings: Findings, schedule: Schedule, revisions: Sequence[Revision]) -> bool:
    """Check one schedule's revisions; return whether its occurrences can be accounted for."""
    if not _revisions_readable(findings, schedule, revisions):
        return False
    for problem in [*_structure_problems(schedule, revisions), *_cursor_problems(revisions)]:
        findings.add("revision", schedule.id, problem)
    last = revisions[-1]
    cursor, first = schedule.next_due_at_ms, last.first_cursor_ms
    if cursor is not None and first is not None and cursor < first:
        findings.add(
            "cursor",
            schedule.id,
            f"cursor {cursor} is before its live revision {last.revision}'s first cursor {first}",
        )
    return True


def _revisions_readable(
    findings: Findings, schedule: Schedule, revisions: Sequence[Revision]
) -> bool:
    if not revisions:
        findings.add(
            "revision",
            schedule.id,
            "has no revision (written past ScheduleAdmin): its occurrences cannot be accounted for",
        )
        return False
    unreadable = [rev.revision for rev in revisions if rev.definition is None and _covers(rev)]
    if unreadable:
        findings.add("revision", schedule.id, f"revisions {unreadable} have unreadable definitions")
        return False
    unjudged = [rev for rev in revisions if rev.rules is None and _covers(rev)]
    for rev in unjudged:
        findings.add(
            "revision",
            schedule.id,
            f"revision {rev.revision} was computed with zone rules tzdata"
            f" {rev.zone_rules_version}, whose rule data the database does not hold: its"
            " occurrences cannot be judged (store it with `ql3 migrate` from a node with that"
            " tzdata)",
        )
    return not unjudged


def _covers(revision: Revision) -> bool:
    """Whether a revision's range may hold occurrences to account for.

    One whose definition cannot be read is harmless when it covers none: a 'migrated' revision
    copied from a row already quarantined (or unreadable) at the upgrade to schema 4, which
    admitted nothing and ended where it began when an operator brought the schedule back.
    """
    if revision.first_cursor_ms is None:
        return False
    return revision.ended_at_ms is None or revision.end_cursor_ms != revision.first_cursor_ms


def _structure_problems(schedule: Schedule, revisions: Sequence[Revision]) -> list[str]:
    """Numbering, the one live revision, and the live definition being the schedule's."""
    numbers = [rev.revision for rev in revisions]
    problems: list[str] = []
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"revision numbers are {numbers}, not 1..{len(numbers)}")
    live = [rev.revision for rev in revisions if rev.ended_at_ms is None]
    if live != numbers[-1:]:
        problems.append(f"live revisions are {live}: exactly the last one must be live")
    if any(rev.reason == MIGRATED for rev in revisions[1:]):
        problems.append("only revision 1 may be 'migrated'")
    last = revisions[-1]
    if last.ended_at_ms is None and last.definition != schedule.definition:
        problems.append(
            f"the schedule's definition differs from its live revision {last.revision}:"
            " changed without a revision"
        )
    return problems


def _cursor_problems(revisions: Sequence[Revision]) -> list[str]:
    """Each first cursor: where the previous revision ended, or placed exactly by the admin."""
    problems = [
        f"revision {rev.revision} keeps the cursor but starts at {rev.first_cursor_ms},"
        f" not where revision {before.revision} ended ({before.end_cursor_ms})"
        for before, rev in pairwise(revisions)
        # A redefinition keeps the cursor: its range must continue exactly where the last ended.
        if rev.reason == "redefined" and rev.first_cursor_ms != before.end_cursor_ms
    ]
    previous: list[Revision | None] = [None, *revisions[:-1]]
    for before, rev in zip(previous, revisions, strict=True):
        if rev.reason not in _PLACED:
            continue
        placed = _placed_cursor(rev, before)
        if rev.first_cursor_ms != placed:
            problems.append(
                f"revision {rev.revision} ({rev.reason}) starts at {rev.first_cursor_ms}, but the"
                f" first occurrence after its placement at {rev.placed_after_ms} and after every"
                f" decided occurrence ({rev.decided_before_ms}) is {placed}"
            )
    return problems


def _placed_cursor(revision: Revision, before: Revision | None) -> int | None:
    """Return the first cursor the admin had to place (see `admin/_plan.initial_cursor`).

    A `zone_rules` revision whose predecessor's rules are not stored was opened by a switch that
    could not count under the old rules: it kept the cursor as far as the new rules allow (the
    first occurrence at or after where the predecessor ended), see `zones/_moves`.
    """
    definition, rules = revision.definition, revision.rules
    if definition is None or rules is None or revision.placed_after_ms is None:
        return None
    # The same arithmetic as the admin's, redone here from what the revision recorded: the
    # checker must not trust the cursor the admin wrote, only recompute it.
    after = revision.placed_after_ms
    kept = before is not None and before.rules is None and before.end_cursor_ms is not None
    if revision.reason == "zone_rules" and kept and before is not None:
        after = (before.end_cursor_ms or 0) - 1
    if definition.start_at_ms is not None:
        after = max(after, definition.start_at_ms - 1)
    if revision.decided_before_ms is not None:
        after = max(after, revision.decided_before_ms)
    cursor = _next(definition, after, rules)
    if definition.end_at_ms is not None and cursor > definition.end_at_ms:
        return None
    return cursor


def revision_windows(schedule: Schedule, revisions: Sequence[Revision]) -> list[Window]:
    """Return each revision's range of occurrences to account for, in occurrence order.

    Ranges follow each other in revision order on any history the `revision` rule accepts. One
    that begins before the previous one ends (possible only where that rule fails) is cut to
    begin there, so the walk can take them one after the other.
    """
    windows = []
    for index, rev in enumerate(revisions):
        definition, rules = rev.definition, rev.rules
        if definition is None or rules is None or rev.first_cursor_ms is None:
            continue
        low = rev.first_cursor_ms
        if definition.start_at_ms is not None:
            low = max(low, definition.start_at_ms)
        end_cursor = schedule.next_due_at_ms if rev.ended_at_ms is None else rev.end_cursor_ms
        end_at = definition.end_at_ms
        # No end cursor: the revision ended (or is) exhausted, so its range runs to end_at_ms.
        high = end_at + 1 if end_at is not None else low
        if end_cursor is not None:
            high = end_cursor
        # A later revision's first cursor ends this one's range, even if its end cursor says later.
        later = [r.first_cursor_ms for r in revisions[index + 1 :] if r.first_cursor_ms is not None]
        if later:
            high = min(high, later[0])
        if end_at is not None:
            high = min(high, end_at + 1)
        windows.append(Window(rev, definition, rules, low, high))
    ordered: list[Window] = []
    for window in sorted(windows, key=lambda w: w.low):
        low = max(window.low, ordered[-1].high) if ordered else window.low
        if low < window.high:
            ordered.append(
                Window(window.revision, window.definition, window.rules, low, window.high)
            )
    return ordered


def _next(definition: ScheduleDefinition, after_ms: int, rules: ZoneRules) -> int:
    return next_occurrence_ms(definition.cron, definition.timezone, after_ms, rules=rules)
