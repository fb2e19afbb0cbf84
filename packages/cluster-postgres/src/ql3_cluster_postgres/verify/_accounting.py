"""The accounting rules of `verify_history` (DESIGN §7): every occurrence is a run or skipped.

For each schedule revision, every occurrence of its definition from its first cursor up to where
it ended (the schedule's cursor for the live revision, `end_at_ms` once exhausted) must be
exactly one run or lie inside exactly one skip record.

`AccountingWalk` is fed one schedule's runs and skip records in occurrence order, as the
database streams them (ten million runs are never held in memory), and keeps only
the next occurrence it expects. A run at exactly that occurrence costs one step of a cheap
occurrence stream (`occurrences_after_ms`), which is what a healthy history is made of; anything
else (a gap, a run off the cron, a skip record) asks the cron engine directly. A gap is counted
arithmetically (`count_occurrences_ms`), never enumerated, so a week-long outage of an
every-second schedule costs a few steps, not 600 000.

A revision's range (its window) ends at its end cursor or at the next revision's first cursor,
whichever is earlier: every occurrence it decided lies before the next first cursor, because the
admin places a cursor after the latest decided occurrence (DESIGN §7). First cursors are checked
exactly against the database time recorded with them (`placed_after_ms`), so no slack is needed
for the moment between the admin's clock read and its insert. Cron math comes from
`ql3_runtime_core`, with the zone rules each revision was computed with (`_zones`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ql3_runtime_core import (
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
    occurrences_after_ms,
)

from ql3_cluster_postgres._definitions import DefinitionColumns, definition_from_columns

from ._records import Revision
from ._revisions import MIGRATED, revision_windows
from ._skips import check_skip
from ._zones import version_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ql3_runtime_core import ScheduleDefinition, ZoneRules

    from ._records import Schedule, Skip, Window
    from ._report import Findings
    from ._zones import VerifyZones

    # Names the `nth` run (0: the first) of an occurrence: (occurrence ms, nth) -> run id.
    RunNamer = Callable[[int, int], int]

__all__ = [
    "Accounting",
    "AccountingWalk",
    "revision_from_row",
]

# Above every epoch-ms instant: "nothing awaited", "no window left".
_NEVER: Final = 2**63


@dataclass
class Accounting:
    """What the walk found for one schedule, summed over its revisions' ranges."""

    occurrences: int = 0
    skipped: int = 0
    missing: int = 0
    range_start_ms: int | None = None
    range_end_ms: int | None = None


def revision_from_row(row: dict[str, Any], zones: VerifyZones) -> Revision:
    try:
        definition = definition_from_columns(DefinitionColumns.of(row))
    except Exception:  # noqa: BLE001  # any unreadable revision is a finding, not a crash
        definition = None
    version = version_for(zones, row["zone_rules_version"], row["created_at_ms"])
    # The row's columns are named as Revision's fields (verify_revisions.sql), read by name.
    computed = {"definition", "zone_rules_version", "rules"}
    fields = {name: row[name] for name in Revision.__dataclass_fields__ if name not in computed}
    return Revision(
        definition=definition,
        zone_rules_version=version,
        rules=zones.rules(version),
        **fields,
    )


class AccountingWalk:
    """One schedule's runs and skip records, fed in occurrence order, accounted window by window.

    Feed every run with `run` (its occurrence, and `nth`: 0 for the first run of an occurrence,
    1 for a second, ...) and every skip record with `skip`, in occurrence order, a skip record
    before a run at its first occurrence; then call `finish`. Runs come without their ids: a
    finding names one through `run_id`. Memory: the windows, and the fire_once skip records
    whose following occurrence has not been reached yet.
    """

    def __init__(  # one schedule, and how to name its runs
        self,
        findings: Findings,
        schedule: Schedule,
        revisions: Sequence[Revision],
        *,
        since_ms: int | None,
        run_id: RunNamer,
        switches: dict[tuple[str, str], list[int]] | None = None,
        history_from_ms: int | None = None,
    ) -> None:
        self.findings = findings
        # Which zone rules version followed which, and when (`VerifyZones.switches`).
        self.switches = switches or {}
        self.schedule = schedule
        self.revisions = revisions
        self.since_ms = since_ms
        self.run_id = run_id
        self.result = Accounting()
        self._windows = revision_windows(schedule, revisions)
        self._index = -1
        # The latest checkpoint boundary (None: none, or a caller's since_ms cut the history).
        self.history_from_ms = history_from_ms
        self._walked = since_ms is not None and history_from_ms is None
        self._walk: _Walk | None = None
        self._low = self._high = _NEVER
        self._next_window()
        # fire_once skip records whose following occurrence must have a run: (occurrence, what).
        self._awaited: list[tuple[int, str]] = []
        self._next_awaited = _NEVER

    def run(self, at_ms: int, nth: int) -> None:
        """Account for one run (the hot path: a run at the expected occurrence)."""
        if at_ms >= self._next_awaited:
            self._settle(at_ms, admitted=True)
        if self._low <= at_ms < self._high:
            walk = self._walk
            if walk is not None:
                walk.run(at_ms, nth)
            return
        self._route(at_ms, at_ms, nth, None)

    def skip(self, skip: Skip) -> None:
        """Account for one skip record."""
        start = skip.first_skipped_ms
        if start >= self._next_awaited:
            self._settle(start, admitted=False)
        if self._low <= start < self._high:
            if self._walk is not None:
                self._walk.visit(start, skip.last_skipped_ms, None, skip)
            return
        self._route(start, skip.last_skipped_ms, None, skip)

    def finish(self) -> Accounting:
        """Close the remaining windows and report what is still awaited; return the counts."""
        while self._index < len(self._windows):
            self._next_window()
        self._settle(_NEVER, admitted=False)
        return self.result

    def await_run(self, occurrence_ms: int, what: str) -> None:
        """Report `what` unless a run at `occurrence_ms` is fed before anything later."""
        self._awaited.append((occurrence_ms, what))
        self._next_awaited = min(self._next_awaited, occurrence_ms)

    def _settle(self, at_ms: int, *, admitted: bool) -> None:
        """Judge the awaited occurrences up to `at_ms` (a run there if `admitted`)."""
        still: list[tuple[int, str]] = []
        for occurrence, what in self._awaited:
            if occurrence > at_ms or (occurrence == at_ms and not admitted):
                still.append((occurrence, what))
            elif occurrence < at_ms:
                self.findings.add("skip_record", self.schedule.id, what)
        self._awaited = still
        self._next_awaited = min((occurrence for occurrence, _ in still), default=_NEVER)

    def _route(self, start: int, end: int, nth: int | None, skip: Skip | None) -> None:
        """Find the window of an item outside the current one (or judge it as outside all)."""
        while start >= self._high:
            self._next_window()
        if start < self._low:
            self._outside(start, end, nth, skip)
        elif self._walk is not None:
            self._walk.visit(start, end, nth, skip)

    def describe(self, start: int, end: int, nth: int | None, skip: Skip | None) -> str:
        """Name a run (`nth` of its occurrence) or a skip record, for a finding."""
        if nth is not None:
            return f"run {self.run_id(start, nth)} at {start}"
        assert skip is not None  # noqa: S101  # an item is a run or a skip record
        return f"skip record {skip.id} [{start}, {end}]"

    def _outside(self, start: int, end: int, nth: int | None, skip: Skip | None) -> None:
        """Judge a run or skip record that lies in no revision's range."""
        findings, schedule = self.findings, self.schedule
        first = self.revisions[0]
        legacy = first.reason == MIGRATED and (
            first.first_cursor_ms is None or start < first.first_cursor_ms
        )
        if nth is not None and legacy:
            # Admitted before accounting existed (schema 4): only its place on the cron is known.
            definition, rules = first.definition, first.rules
            if (
                definition is not None
                and rules is not None
                and not _is_occurrence(definition, start, rules)
            ):
                findings.add(
                    "not_occurrence",
                    schedule.id,
                    lambda: (
                        f"run {self.run_id(start, nth)} admits {start}, not an occurrence"
                        " of revision 1"
                    ),
                )
            return
        if nth is not None:
            findings.add(
                "not_occurrence",
                schedule.id,
                lambda: (
                    f"run {self.run_id(start, nth)} admits {start}, outside the range of every"
                    " revision (before its first cursor, after its end, or at or after the"
                    " schedule's cursor)"
                ),
            )
        elif skip is not None:
            findings.add(
                "skip_record",
                schedule.id,
                f"skip record {skip.id} [{start}, {end}] lies outside the range of every revision",
            )

    def _next_window(self) -> None:
        if self._walk is not None:
            self._walk.finish()
        self._index += 1
        if self._index >= len(self._windows):
            self._walk, self._low, self._high = None, _NEVER, _NEVER
            return
        window = self._windows[self._index]
        self._low, self._high = window.low, window.high
        start = window.low if self.since_ms is None else max(window.low, self.since_ms)
        # A window wholly before since_ms is not checked, but its items still belong to it.
        self._walk = None
        if start < window.high:
            self._walk = _Walk(self, window, start, first=not self._walked)
            self._walked = True


class _Walk:
    """One window: the first occurrence not yet accounted for, and the stream after it."""

    def __init__(self, owner: AccountingWalk, window: Window, start: int, *, first: bool) -> None:
        self.owner = owner
        self.first = first  # the first window walked: a gap at its start is also `checkpoint`
        self.findings = owner.findings
        self.schedule = owner.schedule
        self.window = window
        self.definition = window.definition
        self.rules = window.rules
        self.start = start
        self.previous_run: int | None = None
        self.expected = 0
        self._stream: Iterator[int] = iter(())
        self._seek(start - 1)
        self.origin = self.expected

    def _seek(self, after_ms: int) -> None:
        """Expect the first occurrence after `after_ms` (and restart the stream there)."""
        definition = self.definition
        self._stream = occurrences_after_ms(
            definition.cron, definition.timezone, after_ms, rules=self.rules
        )
        self.expected = next(self._stream)

    def _expect_after(self, end_ms: int) -> None:
        """Expect the first occurrence after `end_ms`, from the stream when it is the next one."""
        if end_ms == self.expected:
            self.expected = next(self._stream)
        else:
            self._seek(end_ms)

    def run(self, at_ms: int, nth: int) -> None:
        if at_ms == self.expected:  # the occurrence expected next: admitted, in order
            self.previous_run = at_ms
            self.expected = next(self._stream)
        elif at_ms != self.previous_run:  # anything else but a repeat (that is `duplicate`)
            self.visit(at_ms, at_ms, nth, None)

    def visit(self, start: int, end: int, nth: int | None, skip: Skip | None) -> None:
        """Judge a run (`nth` of its occurrence) or a skip record covering `[start, end]`."""
        definition = self.definition
        if end < self.start:
            return
        if start < self.start:  # begins before since_ms: it covers what it covers
            if skip is not None:
                # Its occurrences from since_ms on are skipped, not expected: count them.
                self.owner.result.skipped += count_occurrences_ms(
                    definition.cron,
                    definition.timezone,
                    self.start,
                    min(end, self.window.high - 1),
                    rules=self.rules,
                )
            self._expect_at_least_after(end)
            return
        if nth is not None and not _is_occurrence(definition, start, self.rules):
            revision = self.window.revision.revision
            self.findings.add(
                "not_occurrence",
                self.schedule.id,
                lambda: (
                    f"run {self.owner.run_id(start, nth)} admits {start}, which is not an"
                    f" occurrence of {definition.cron!r} in {definition.timezone} (revision"
                    f" {revision})"
                ),
            )
            return
        if start < self.expected:
            if nth is None or start != self.previous_run:  # a repeat is `duplicate`
                expected = self.expected
                self.findings.add(
                    "skip_record",
                    self.schedule.id,
                    lambda: (
                        f"{self.owner.describe(start, end, nth, skip)} overlaps occurrences"
                        f" already accounted for (up to {expected})"
                    ),
                )
            self._expect_at_least_after(end)
            return
        if start > self.expected:
            self._missing(start, before_row=True)
        if skip is not None:
            check_skip(self.owner, self.window, skip)
            self.owner.result.skipped += skip.skipped_count
        else:
            self.previous_run = start
        self._expect_after(end)

    def _missing(self, until: int, *, before_row: bool) -> None:
        """Count the gap `[expected, until)`; at the very start, before a row: also unproven."""
        expected = self.expected
        missing = _gap(self.findings, self.schedule, self.window, expected, until)
        self.owner.result.missing += missing
        if missing and before_row and self.first and expected == self.origin:
            boundary = self.owner.history_from_ms
            after = "the schedule's first cursor" if boundary is None else f"checkpoint {boundary}"
            self.findings.add(
                "checkpoint",
                self.schedule.id,
                f"{missing} occurrence(s) from {expected} (after {after}) before the first"
                " remaining row are gone and no checkpoint covers them",
            )

    def _expect_at_least_after(self, end_ms: int) -> None:
        if _next(self.definition, end_ms, self.rules) > self.expected:
            self._seek(end_ms)

    def finish(self) -> None:
        window, result, definition = self.window, self.owner.result, self.definition
        if self.expected < window.high:
            self._missing(window.high, before_row=False)
        result.occurrences += count_occurrences_ms(
            definition.cron, definition.timezone, self.start, window.high - 1, rules=self.rules
        )
        if result.range_start_ms is None:
            result.range_start_ms = self.start
        result.range_end_ms = window.high


def _gap(findings: Findings, schedule: Schedule, window: Window, expected: int, until: int) -> int:
    """Report the occurrences in `[expected, until)` (none accounted for); return how many."""
    definition, rules = window.definition, window.rules
    missing = count_occurrences_ms(
        definition.cron, definition.timezone, expected, until - 1, rules=rules
    )
    if missing:
        last = latest_occurrence_ms(
            definition.cron, definition.timezone, until - 1, expected, rules=rules
        )
        findings.add(
            "missing",
            schedule.id,
            f"{missing} occurrence(s) from {expected} to {last} (revision"
            f" {window.revision.revision}, {definition.misfire_policy.value}) have no run and"
            " are in no skip record",
        )
    return missing


def _next(definition: ScheduleDefinition, after_ms: int, rules: ZoneRules) -> int:
    return next_occurrence_ms(definition.cron, definition.timezone, after_ms, rules=rules)


def _is_occurrence(definition: ScheduleDefinition, at_ms: int, rules: ZoneRules) -> bool:
    return _next(definition, at_ms - 1, rules) == at_ms
