"""The checker behind `ql3 verify` as it was before it streamed (issue 12.6), kept as a reference.

`reference_verdict` is the in-memory implementation of commit 5ec89bc, verbatim but for its
reading: it reads every run of the history at once and judges it in Python. `verify_compare`
runs it beside `verify_history` on every fixture history of the verify tests, so each of them
shows that the streaming checker reaches the same verdict. Its SQL is inline (the package no
longer ships those statements) and it returns violations and verdicts, not a `VerifyReport`.

It knows one set of zone rules, this node's tzdata, and is restricted to histories decided under
that one version (every fixture history of the verify tests is: the test database records this
node's version). Histories that span an adopt, where each revision is judged by the rules it
names, are checked by `verify_history` alone (`test_zone_adopt.py`, chaos `zone-switch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from psycopg.rows import dict_row
from ql3_cluster_postgres._admin_models import definition_from_columns
from ql3_cluster_postgres._sql import query
from ql3_cluster_postgres._verify_report import ScheduleVerdict, Violation
from ql3_runtime_core import (
    MisfirePolicy,
    ScheduleDefinition,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
    quarantine_reason,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Reference", "reference_verdict"]

_RUNS_SQL = """SELECT r.id, r.schedule_id, r.task_id, r.scheduled_for_ms, r.created_at_ms
FROM ql3.runs AS r
WHERE %(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint
ORDER BY r.schedule_id, r.id"""
_SKIPS_SQL = """SELECT k.id,
       k.schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.skipped_count,
       k.misfire_policy,
       k.claim_acquired_at_ms,
       k.created_at_ms
FROM ql3.skipped_occurrences AS k
WHERE %(since_ms)s::bigint IS NULL OR k.last_skipped_ms >= %(since_ms)s::bigint
ORDER BY k.schedule_id, k.first_skipped_ms, k.id"""
_SHAPE_SQL = """WITH scoped AS (
    SELECT r.id, r.schedule_id, r.created_at_ms
    FROM ql3.runs AS r
    WHERE %(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint
),
attempt_counts AS (
    SELECT a.run_id,
           count(*) FILTER (WHERE a.attempt_number = 1) AS first_attempts,
           count(*) AS all_attempts,
           count(*) FILTER (
               WHERE a.attempt_number = 1 AND a.created_at_ms <> s.created_at_ms
           ) AS attempts_off_time
    FROM ql3.attempts AS a
    JOIN scoped AS s ON s.id = a.run_id
    GROUP BY a.run_id
),
event_counts AS (
    SELECT e.run_id,
           count(*) FILTER (WHERE e.kind = 'run.admitted') AS run_admitted,
           count(*) FILTER (WHERE e.kind = 'attempt.queued') AS attempt_queued,
           count(*) FILTER (
               WHERE e.kind = 'run.admitted' AND e.created_at_ms <> s.created_at_ms
           ) + count(*) FILTER (
               WHERE e.kind = 'attempt.queued' AND e.created_at_ms < s.created_at_ms
           ) + CASE
               WHEN min(e.created_at_ms) FILTER (WHERE e.kind = 'attempt.queued')
                    > min(s.created_at_ms) THEN 1
               ELSE 0
           END AS events_off_time
    FROM ql3.events AS e
    JOIN scoped AS s ON s.id = e.run_id
    GROUP BY e.run_id
)
SELECT s.id,
       s.schedule_id,
       coalesce(a.first_attempts, 0) AS attempts,
       coalesce(a.all_attempts, 0) AS all_attempts,
       coalesce(a.attempts_off_time, 0) AS attempts_off_time,
       coalesce(e.run_admitted, 0) AS run_admitted,
       coalesce(e.attempt_queued, 0) AS attempt_queued,
       coalesce(e.events_off_time, 0) AS events_off_time
FROM scoped AS s
LEFT JOIN attempt_counts AS a ON a.run_id = s.id
LEFT JOIN event_counts AS e ON e.run_id = s.id
WHERE coalesce(a.first_attempts, 0) <> 1
   OR coalesce(a.attempts_off_time, 0) <> 0
   OR coalesce(e.run_admitted, 0) <> 1
   OR coalesce(e.attempt_queued, 0) <> coalesce(a.all_attempts, 0)
   OR coalesce(e.events_off_time, 0) <> 0
ORDER BY s.id"""
_ORPHANS_SQL = """SELECT 'attempt' AS kind, a.id, a.run_id
FROM ql3.attempts AS a
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = a.run_id)
UNION ALL
SELECT 'event' AS kind, e.id, e.run_id
FROM ql3.events AS e
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = e.run_id)
ORDER BY 1, 2"""

# -- the rules (was _verify_rules)

# There is no creation slack any more (it was 60 s): where a schedule's occurrences begin is its
# first revision's first cursor, checked exactly against the database time the admin recorded
# placing it after (placed_after_ms), so the bound kept between clock read and insert is 0 ms.
_DEFINITION_COLUMNS = (
    "cron",
    "timezone",
    "misfire_policy",
    "misfire_grace_ms",
    "start_at_ms",
    "end_at_ms",
)


@dataclass(frozen=True)
class Schedule:
    id: int
    task_id: int
    name: str
    definition: ScheduleDefinition
    state: str
    next_due_at_ms: int | None
    claim_owner_id: str | None
    claim_expires_at_ms: int | None
    updated_at_ms: int
    created_at_ms: int


@dataclass(frozen=True)
class Run:
    id: int
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    created_at_ms: int


@dataclass
class Findings:
    violations: list[Violation]

    def add(self, rule: str, schedule_id: int | None, detail: str) -> None:
        self.violations.append(Violation(rule=rule, schedule_id=schedule_id, detail=detail))


def check_invalid(findings: Findings, rows: Sequence[dict[str, Any]]) -> set[int]:
    """Report quarantined and unreadable schedules; return the ids the other rules must skip.

    A quarantined schedule (state `invalid`) admits nothing: one `invalid_schedule` finding with
    its reason. So does an active or paused one whose definition cannot be read (replicas will
    quarantine it at its next claim). Neither has a definition the rules could judge its history
    by; nor has a retired or exhausted row that cannot be read, which is skipped silently since
    it is never claimed again.
    """
    skipped: set[int] = set()
    for row in rows:
        error = _definition_error(row)
        if row["state"] == "invalid":
            findings.add(
                "invalid_schedule",
                row["id"],
                f"{row['name']!r} is quarantined since {row['invalidated_at_ms']} and admits"
                f" nothing: {row['invalid_reason']} (apply a corrected definition, or resume"
                " or retire it)",
            )
        elif error is not None and row["state"] in {"active", "paused"}:
            findings.add(
                "invalid_schedule",
                row["id"],
                f"{row['name']!r} (state {row['state']}) has a definition that cannot be read:"
                f" {error}; replicas quarantine it at its next claim",
            )
        elif error is None:
            continue
        skipped.add(row["id"])
    return skipped


def _definition_error(row: dict[str, Any]) -> str | None:
    try:
        definition_from_columns(tuple(row[column] for column in _DEFINITION_COLUMNS))
    except Exception as exc:  # noqa: BLE001  # any unreadable row is a finding, not a crash
        return quarantine_reason(exc)
    return None


def schedule_from_row(row: dict[str, Any]) -> Schedule:
    definition = definition_from_columns(tuple(row[column] for column in _DEFINITION_COLUMNS))
    return Schedule(
        id=row["id"],
        task_id=row["task_id"],
        name=row["name"],
        definition=definition,
        state=row["state"],
        next_due_at_ms=row["next_due_at_ms"],
        claim_owner_id=row["claim_owner_id"],
        claim_expires_at_ms=row["claim_expires_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        created_at_ms=row["created_at_ms"],
    )


def check_shape(
    findings: Findings,
    shape_rows: Sequence[dict[str, Any]],
    orphan_rows: Sequence[dict[str, Any]],
) -> None:
    for row in shape_rows:
        findings.add(
            "shape",
            row["schedule_id"],
            f"run {row['id']} has {row['attempts']} first attempt(s) (expected 1),"
            f" {row['run_admitted']} run.admitted and {row['attempt_queued']} attempt.queued"
            f" event(s) (expected 1 each), {row['attempts_off_time']} attempt(s) and"
            f" {row['events_off_time']} admission event(s) not at the run's commit time",
        )
    for row in orphan_rows:
        findings.add(
            "shape", None, f"{row['kind']} {row['id']} points at missing run {row['run_id']}"
        )


def check_schedules(  # the rows of one snapshot, and the options
    findings: Findings,
    schedules: Sequence[Schedule],
    runs: Sequence[Run],
    revisions: Sequence[Revision],
    skips: Sequence[Skip],
    *,
    now_ms: int,
    since_ms: int | None,
    grace_ms: int,
) -> list[ScheduleVerdict]:
    by_schedule = _group(runs)
    revisions_of = _group(revisions)
    skips_of = _group(skips)
    known = {schedule.id for schedule in schedules}
    for schedule_id in sorted(set(by_schedule) - known):
        ids = [run.id for run in by_schedule[schedule_id]]
        findings.add("shape", schedule_id, f"runs {ids} belong to no schedule")
    for schedule_id in sorted(set(revisions_of) - known):
        findings.add("revision", schedule_id, "revisions belong to no schedule")
    for schedule_id in sorted(set(skips_of) - known):
        ids = [skip.id for skip in skips_of[schedule_id]]
        findings.add("skip_record", schedule_id, f"skip records {ids} belong to no schedule")
    verdicts = []
    for schedule in schedules:
        own = by_schedule.get(schedule.id, [])
        _check_claim(findings, schedule, now_ms=now_ms, grace_ms=grace_ms)
        _check_runs(findings, schedule, own, now_ms=now_ms)
        _check_cursor(findings, schedule, own)
        accounting = account_schedule(
            findings,
            schedule,
            revisions_of.get(schedule.id, []),
            own,
            skips_of.get(schedule.id, []),
            since_ms=since_ms,
        )
        admitted = len({run.scheduled_for_ms for run in own})
        verdicts.append(
            ScheduleVerdict(
                schedule_id=schedule.id,
                name=schedule.name,
                state=schedule.state,
                misfire_policy=schedule.definition.misfire_policy.value,
                range_start_ms=accounting.range_start_ms,
                range_end_ms=accounting.range_end_ms,
                occurrences=accounting.occurrences,
                expected=accounting.occurrences - accounting.skipped,
                admitted=admitted,
                skipped=accounting.skipped,
                duplicated=len(own) - admitted,
                early=sum(1 for run in own if run.created_at_ms < run.scheduled_for_ms),
                missing=accounting.missing,
            )
        )
    return verdicts


def _group(rows: Sequence[Any]) -> dict[int, list[Any]]:
    """Group rows (in their order) by their `schedule_id`."""
    grouped: dict[int, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row.schedule_id, []).append(row)
    return grouped


def _check_claim(findings: Findings, schedule: Schedule, *, now_ms: int, grace_ms: int) -> None:
    expires = schedule.claim_expires_at_ms
    if expires is not None and expires + grace_ms < now_ms:
        findings.add(
            "stale_claim",
            schedule.id,
            f"claim of owner {schedule.claim_owner_id!r} expired at {expires},"
            f" {now_ms - expires} ms before the database clock {now_ms}"
            f" (grace {grace_ms} ms)",
        )


def _check_runs(
    findings: Findings, schedule: Schedule, runs: Sequence[Run], *, now_ms: int
) -> None:
    seen: dict[int, int] = {}
    previous: Run | None = None
    for run in runs:  # in run id order
        if run.task_id != schedule.task_id:
            findings.add(
                "shape",
                schedule.id,
                f"run {run.id} has task {run.task_id}, its schedule has task {schedule.task_id}",
            )
        if run.scheduled_for_ms in seen:
            findings.add(
                "duplicate",
                schedule.id,
                f"occurrence {run.scheduled_for_ms} admitted again by run {run.id}"
                f" (first by run {seen[run.scheduled_for_ms]})",
            )
        else:
            seen[run.scheduled_for_ms] = run.id
        if run.created_at_ms < run.scheduled_for_ms:
            findings.add(
                "early",
                schedule.id,
                f"run {run.id} committed at {run.created_at_ms},"
                f" {run.scheduled_for_ms - run.created_at_ms} ms before its occurrence"
                f" {run.scheduled_for_ms}",
            )
        if run.created_at_ms > now_ms:
            findings.add(
                "future",
                schedule.id,
                f"run {run.id} committed at {run.created_at_ms},"
                f" {run.created_at_ms - now_ms} ms after the database clock {now_ms}",
            )
        if previous is not None:
            _check_pair(findings, schedule, previous, run)
        previous = run
    if previous is not None and schedule.updated_at_ms < previous.created_at_ms:
        findings.add(
            "time_backwards",
            schedule.id,
            f"schedule updated_at_ms {schedule.updated_at_ms} is before the commit time"
            f" {previous.created_at_ms} of its latest run {previous.id}",
        )


def _check_pair(findings: Findings, schedule: Schedule, before: Run, after: Run) -> None:
    if after.created_at_ms < before.created_at_ms:
        findings.add(
            "time_backwards",
            schedule.id,
            f"run {after.id} committed at {after.created_at_ms}, before run {before.id}"
            f" at {before.created_at_ms}",
        )
    if after.scheduled_for_ms < before.scheduled_for_ms:
        findings.add(
            "order",
            schedule.id,
            f"run {after.id} admits occurrence {after.scheduled_for_ms}, before the occurrence"
            f" {before.scheduled_for_ms} of the earlier run {before.id}",
        )


def _check_cursor(findings: Findings, schedule: Schedule, runs: Sequence[Run]) -> None:
    cursor = schedule.next_due_at_ms
    if schedule.state not in ("active", "paused") or cursor is None:
        return
    definition = schedule.definition
    latest = max((run.scheduled_for_ms for run in runs), default=None)
    problems = []
    if latest is not None and cursor <= latest:
        problems.append(f"is not after the latest admitted occurrence {latest}")
    if not _is_occurrence(definition, cursor):
        problems.append(f"is not an occurrence of {definition.cron!r} in {definition.timezone}")
    if (
        schedule.state == "active"
        and definition.end_at_ms is not None
        and cursor > definition.end_at_ms
    ):
        problems.append(f"passed end_at_ms {definition.end_at_ms} but the schedule is still active")
    for problem in problems:
        findings.add("cursor", schedule.id, f"cursor {cursor} {problem}")


# -- the accounting (was _verify_accounting)

MIGRATED = "migrated"
# Revisions whose first cursor the admin placed from its clock (the others keep a cursor).
_PLACED = frozenset({"created", "replaced"})


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
            if item.skip is not None:  # from since_ms on, its occurrences are skipped
                self.result.skipped += count_occurrences_ms(
                    definition.cron,
                    definition.timezone,
                    self.start,
                    min(item.end, self.window.high - 1),
                )
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
    assert item.skip is not None  # an item is a run or a skip record
    return f"skip record {item.skip.id} [{item.start}, {item.end}]"


def _next(definition: ScheduleDefinition, after_ms: int) -> int:
    return next_occurrence_ms(definition.cron, definition.timezone, after_ms)


def _is_occurrence(definition: ScheduleDefinition, at_ms: int) -> bool:
    return _next(definition, at_ms - 1) == at_ms


# -- the reading (was _verify)


class Reference(NamedTuple):
    """What the old checker found: its violations, per-schedule verdicts and totals."""

    violations: list[Violation]
    verdicts: list[ScheduleVerdict]
    schedules: int
    runs: int


def reference_verdict(
    conninfo: str, *, since_ms: int | None = None, stale_claim_grace_ms: int = 5_000
) -> Reference:
    """Check the history at `conninfo` the way verify_history did before it streamed."""
    params = {"since_ms": since_ms}
    with psycopg.connect(conninfo, autocommit=False) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.cursor(row_factory=dict_row) as cur:
            now_row = cur.execute(query("verify_now")).fetchone()
            schedule_rows = cur.execute(query("verify_schedules")).fetchall()
            run_rows = cur.execute(_RUNS_SQL, params).fetchall()
            revision_rows = cur.execute(query("verify_revisions")).fetchall()
            skip_rows = cur.execute(_SKIPS_SQL, params).fetchall()
            shape_rows = cur.execute(_SHAPE_SQL, params).fetchall()
            orphan_rows = cur.execute(_ORPHANS_SQL).fetchall()
        conn.rollback()
    assert now_row is not None
    now_ms = int(now_row["now_ms"])
    findings = Findings([])
    skipped = check_invalid(findings, schedule_rows)
    schedules = [schedule_from_row(row) for row in schedule_rows if row["id"] not in skipped]
    runs = [Run(**row) for row in run_rows if row["schedule_id"] not in skipped]
    revisions = [revision_from_row(r) for r in revision_rows if r["schedule_id"] not in skipped]
    skips = [skip_from_row(row) for row in skip_rows if row["schedule_id"] not in skipped]
    check_shape(findings, shape_rows, orphan_rows)
    verdicts = check_schedules(
        findings,
        schedules,
        runs,
        revisions,
        skips,
        now_ms=now_ms,
        since_ms=since_ms,
        grace_ms=stale_claim_grace_ms,
    )
    return Reference(findings.violations, verdicts, len(schedule_rows), len(run_rows))
