"""The accounting rules of `verify_history` (issue 10.5): every occurrence is a run or skipped.

Pure functions over rows read in one snapshot, like `_verify_rules`. For each schedule revision,
every occurrence of its definition from its first cursor up to where it ended (the schedule's
cursor for the live revision, `end_at_ms` once exhausted) must be exactly one run or lie inside
exactly one skip record. Nothing is enumerated: runs and skip ranges are walked in order and each
gap between them is counted arithmetically (`count_occurrences_ms`), so a week-long outage of an
every-second schedule costs a few steps, not 600 000.

A revision's range ends at its end cursor or at the next revision's first cursor, whichever is
earlier: every occurrence it decided lies before the next first cursor, because the admin places
a cursor after the latest decided occurrence (issue 10.4). First cursors are checked exactly
against the database time recorded with them (`placed_after_ms`), so no slack is needed for the
moment between the admin's clock read and its insert. Cron math comes from `ql3_runtime_core`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, NamedTuple

from ql3_runtime_core import (
    MisfirePolicy,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
)

from ._records import definition_from_columns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ScheduleDefinition

    from ._verify_rules import Findings, Run, Schedule

__all__ = [
    "Accounting",
    "Revision",
    "Skip",
    "account_schedule",
    "revision_from_row",
    "skip_from_row",
]

MIGRATED = "migrated"
# Revisions whose first cursor the admin placed from its clock (the others keep a cursor).
_PLACED = frozenset({"created", "replaced"})
_DEFINITION_COLUMNS = (
    "cron",
    "timezone",
    "misfire_policy",
    "misfire_grace_ms",
    "start_at_ms",
    "end_at_ms",
)


@dataclass(frozen=True)
class Revision:
    schedule_id: int
    revision: int
    reason: str
    definition: ScheduleDefinition | None  # None: the stored definition cannot be read
    first_cursor_ms: int | None
    end_cursor_ms: int | None
    placed_after_ms: int | None
    created_at_ms: int
    ended_at_ms: int | None
    decided_before_ms: int | None


@dataclass(frozen=True)
class Skip:
    id: int
    schedule_id: int
    first_skipped_ms: int
    last_skipped_ms: int
    skipped_count: int
    misfire_policy: str
    claim_acquired_at_ms: int
    created_at_ms: int


@dataclass
class Accounting:
    """What the walk found for one schedule, summed over its revisions' ranges."""

    occurrences: int = 0
    skipped: int = 0
    missing: int = 0
    range_start_ms: int | None = None
    range_end_ms: int | None = None


class _Item(NamedTuple):
    """A run (start == end) or a skip record, in occurrence order."""

    start: int
    end: int
    run: Run | None
    skip: Skip | None


@dataclass(frozen=True)
class _Window:
    revision: Revision
    definition: ScheduleDefinition
    low: int
    high: int  # exclusive


def revision_from_row(row: dict[str, Any]) -> Revision:
    try:
        definition = definition_from_columns(tuple(row[c] for c in _DEFINITION_COLUMNS))
    except Exception:  # noqa: BLE001  # any unreadable revision is a finding, not a crash
        definition = None
    fields = {name: row[name] for name in Revision.__dataclass_fields__ if name != "definition"}
    return Revision(definition=definition, **fields)


def skip_from_row(row: dict[str, Any]) -> Skip:
    return Skip(**row)


def account_schedule(  # the rows of one schedule, read in one snapshot
    findings: Findings,
    schedule: Schedule,
    revisions: Sequence[Revision],
    runs: Sequence[Run],
    skips: Sequence[Skip],
    *,
    since_ms: int | None,
) -> Accounting:
    """Check one schedule's revisions and account for every occurrence of their ranges."""
    if not _revisions_readable(findings, schedule, revisions):
        return Accounting()
    _check_revisions(findings, schedule, revisions)
    windows = _windows(schedule, revisions)
    items = sorted(
        [_Item(r.scheduled_for_ms, r.scheduled_for_ms, r, None) for r in runs]
        + [_Item(s.first_skipped_ms, s.last_skipped_ms, None, s) for s in skips],
        key=lambda item: (item.start, item.skip is None, item.end),
    )
    inside: dict[int, list[_Item]] = {id(window): [] for window in windows}
    for item in items:
        window = next((w for w in windows if w.low <= item.start < w.high), None)
        if window is None:
            _outside(findings, schedule, revisions, item)
        else:
            inside[id(window)].append(item)
    result = Accounting()
    runs_at = {run.scheduled_for_ms for run in runs}
    for window in windows:
        _Walk(findings, schedule, window, runs_at, result).run(inside[id(window)], since_ms)
    return result


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
    return True


def _covers(revision: Revision) -> bool:
    """Whether a revision's range may hold occurrences to account for.

    One whose definition cannot be read is harmless when it covers none: a 'migrated' revision
    copied from a row already quarantined (or unreadable) at the upgrade to schema 4, which
    admitted nothing and ended where it began when an operator brought the schedule back.
    """
    if revision.first_cursor_ms is None:
        return False
    return revision.ended_at_ms is None or revision.end_cursor_ms != revision.first_cursor_ms


def _check_revisions(findings: Findings, schedule: Schedule, revisions: Sequence[Revision]) -> None:
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
        if rev.reason == "redefined" and rev.first_cursor_ms != before.end_cursor_ms
    ]
    problems.extend(
        f"revision {rev.revision} ({rev.reason}) starts at {rev.first_cursor_ms}, but the first"
        f" occurrence after its placement at {rev.placed_after_ms} and after every decided"
        f" occurrence ({rev.decided_before_ms}) is {_placed_cursor(rev)}"
        for rev in revisions
        if rev.reason in _PLACED and rev.first_cursor_ms != _placed_cursor(rev)
    )
    return problems


def _placed_cursor(revision: Revision) -> int | None:
    """Return the first cursor the admin had to place (see `_admin_plan.initial_cursor`)."""
    definition = revision.definition
    if definition is None or revision.placed_after_ms is None:
        return None
    after = revision.placed_after_ms
    if definition.start_at_ms is not None:
        after = max(after, definition.start_at_ms - 1)
    if revision.decided_before_ms is not None:
        after = max(after, revision.decided_before_ms)
    cursor = _next(definition, after)
    if definition.end_at_ms is not None and cursor > definition.end_at_ms:
        return None
    return cursor


def _windows(schedule: Schedule, revisions: Sequence[Revision]) -> list[_Window]:
    """Return each revision's range of occurrences to account for (see the module docstring)."""
    windows = []
    for index, rev in enumerate(revisions):
        definition = rev.definition
        if definition is None or rev.first_cursor_ms is None:
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
        later = [r.first_cursor_ms for r in revisions[index + 1 :] if r.first_cursor_ms is not None]
        if later:
            high = min(high, later[0])
        if end_at is not None:
            high = min(high, end_at + 1)
        windows.append(_Window(rev, definition, low, high))
    return windows


def _outside(
    findings: Findings, schedule: Schedule, revisions: Sequence[Revision], item: _Item
) -> None:
    """Judge a run or skip record that lies in no revision's range."""
    first = revisions[0]
    legacy = first.reason == MIGRATED and (
        first.first_cursor_ms is None or item.start < first.first_cursor_ms
    )
    if item.run is not None and legacy:
        # Admitted before accounting existed (schema 4): only its place on the cron is known.
        if first.definition is not None and not _is_occurrence(first.definition, item.start):
            findings.add(
                "not_occurrence",
                schedule.id,
                f"run {item.run.id} admits {item.start}, not an occurrence of revision 1",
            )
        return
    if item.run is not None:
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {item.run.id} admits {item.start}, outside the range of every revision"
            " (before its first cursor, after its end, or at or after the schedule's cursor)",
        )
    elif item.skip is not None:
        findings.add(
            "skip_record",
            schedule.id,
            f"skip record {item.skip.id} [{item.start}, {item.end}] lies outside the range of"
            " every revision",
        )


class _Walk:
    """One window's runs and skip records in order, and the first occurrence not yet accounted."""

    def __init__(
        self,
        findings: Findings,
        schedule: Schedule,
        window: _Window,
        runs_at: set[int],
        result: Accounting,
    ) -> None:
        self.findings = findings
        self.schedule = schedule
        self.window = window
        self.definition = window.definition
        self.runs_at = runs_at
        self.result = result
        self.previous_run: int | None = None
        self.start = window.low
        self.expected = window.low

    def run(self, items: Sequence[_Item], since_ms: int | None) -> None:
        window = self.window
        self.start = window.low if since_ms is None else max(window.low, since_ms)
        if self.start >= window.high:
            return
        self.expected = _next(self.definition, self.start - 1)
        for item in items:
            if item.end >= self.start:
                self._visit(item)
        if self.expected < window.high:
            self.result.missing += _gap(
                self.findings, self.schedule, window, self.expected, window.high
            )
        self.result.occurrences += count_occurrences_ms(
            self.definition.cron, self.definition.timezone, self.start, window.high - 1
        )
        if self.result.range_start_ms is None:
            self.result.range_start_ms = self.start
        self.result.range_end_ms = window.high

    def _visit(self, item: _Item) -> None:
        definition = self.definition
        if item.start < self.start:  # begins before since_ms: it covers what it covers
            self.expected = max(self.expected, _next(definition, item.end))
            return
        if item.run is not None and not _is_occurrence(definition, item.start):
            self.findings.add(
                "not_occurrence",
                self.schedule.id,
                f"run {item.run.id} admits {item.start}, which is not an occurrence of"
                f" {definition.cron!r} in {definition.timezone} (revision"
                f" {self.window.revision.revision})",
            )
            return
        if item.start < self.expected:
            if item.run is None or item.start != self.previous_run:  # a repeat is `duplicate`
                self.findings.add(
                    "skip_record",
                    self.schedule.id,
                    f"{_describe(item)} overlaps occurrences already accounted for (up to"
                    f" {self.expected})",
                )
            self.expected = max(self.expected, _next(definition, item.end))
            return
        if item.start > self.expected:
            self.result.missing += _gap(
                self.findings, self.schedule, self.window, self.expected, item.start
            )
        if item.skip is not None:
            _check_skip(self.findings, self.schedule, self.window, item.skip, self.runs_at)
            self.result.skipped += item.skip.skipped_count
        else:
            self.previous_run = item.start
        self.expected = _next(definition, item.end)


def _gap(findings: Findings, schedule: Schedule, window: _Window, expected: int, until: int) -> int:
    """Report the occurrences in `[expected, until)` (none accounted for); return how many."""
    definition = window.definition
    missing = count_occurrences_ms(definition.cron, definition.timezone, expected, until - 1)
    if missing:
        last = latest_occurrence_ms(definition.cron, definition.timezone, until - 1, expected)
        findings.add(
            "missing",
            schedule.id,
            f"{missing} occurrence(s) from {expected} to {last} (revision"
            f" {window.revision.revision}, {definition.misfire_policy.value}) have no run and"
            " are in no skip record",
        )
    return missing


def _check_skip(
    findings: Findings, schedule: Schedule, window: _Window, skip: Skip, runs_at: set[int]
) -> None:
    """Check that a skip record holds exactly the missed occurrences its policy had to skip."""
    definition = window.definition
    first, last = skip.first_skipped_ms, skip.last_skipped_ms
    grace = definition.misfire_grace_ms
    problems: list[str] = []
    if skip.misfire_policy != definition.misfire_policy.value:
        problems.append(
            f"records policy {skip.misfire_policy!r}, its revision has"
            f" {definition.misfire_policy.value!r}"
        )
    if not (_is_occurrence(definition, first) and _is_occurrence(definition, last)):
        problems.append("does not begin and end on occurrences")
    else:
        exact = count_occurrences_ms(definition.cron, definition.timezone, first, last)
        if exact != skip.skipped_count:
            problems.append(f"counts {skip.skipped_count} occurrences, its range holds {exact}")
    if skip.claim_acquired_at_ms - last <= grace:
        problems.append(
            f"skips {last}, on time at the claim {skip.claim_acquired_at_ms} (grace {grace} ms)"
        )
    if last >= window.high:
        problems.append(f"reaches past the end of its revision's range ({window.high})")
    following = _next(definition, last)
    if definition.misfire_policy is MisfirePolicy.FIRE_ONCE and following not in runs_at:
        problems.append(f"but fire_once admits the latest missed occurrence, {following}: no run")
    missed_too = skip.claim_acquired_at_ms - following > grace and (
        definition.end_at_ms is None or following <= definition.end_at_ms
    )
    if definition.misfire_policy is MisfirePolicy.SKIP and missed_too:
        problems.append(f"stops before {following}, which that claim had missed too")
    for problem in problems:
        findings.add(
            "skip_record", schedule.id, f"{_describe(_Item(first, last, None, skip))} {problem}"
        )


def _describe(item: _Item) -> str:
    if item.run is not None:
        return f"run {item.run.id} at {item.start}"
    assert item.skip is not None  # noqa: S101  # an item is a run or a skip record
    return f"skip record {item.skip.id} [{item.start}, {item.end}]"


def _next(definition: ScheduleDefinition, after_ms: int) -> int:
    return next_occurrence_ms(definition.cron, definition.timezone, after_ms)


def _is_occurrence(definition: ScheduleDefinition, at_ms: int) -> bool:
    return _next(definition, at_ms - 1) == at_ms
