"""The rules of `verify_history` (described in `_verify`'s docstring) as pure functions.

They judge rows already read in one snapshot and never touch the database, so `_verify` stays
about reading and this module about judging. Cron math comes from `ql3_runtime_core` only.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    MisfirePolicy,
    ScheduleDefinition,
    next_occurrence_ms,
    quarantine_reason,
)

from ._records import definition_from_columns
from ._verify_report import ScheduleVerdict, Violation

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "Findings",
    "Run",
    "Schedule",
    "check_invalid",
    "check_schedules",
    "check_shape",
    "schedule_from_row",
]

_CREATION_SLACK_MS = 60_000
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
            f"run {row['id']} has {row['attempts']} attempt(s) (expected 1),"
            f" {row['run_admitted']} run.admitted and {row['attempt_queued']} attempt.queued"
            f" event(s) (expected 1 each), {row['attempts_off_time']} attempt(s) and"
            f" {row['events_off_time']} admission event(s) not at the run's commit time",
        )
    for row in orphan_rows:
        findings.add(
            "shape", None, f"{row['kind']} {row['id']} points at missing run {row['run_id']}"
        )


def check_schedules(
    findings: Findings,
    schedules: Sequence[Schedule],
    runs: Sequence[Run],
    *,
    now_ms: int,
    since_ms: int | None,
    grace_ms: int,
    max_occurrences: int,
) -> list[ScheduleVerdict]:
    by_schedule: dict[int, list[Run]] = {}
    for run in runs:
        by_schedule.setdefault(run.schedule_id, []).append(run)
    known = {schedule.id for schedule in schedules}
    for schedule_id in sorted(set(by_schedule) - known):
        ids = [run.id for run in by_schedule[schedule_id]]
        findings.add("shape", schedule_id, f"runs {ids} belong to no schedule")
    verdicts = []
    for schedule in schedules:
        own = by_schedule.get(schedule.id, [])
        _check_claim(findings, schedule, now_ms=now_ms, grace_ms=grace_ms)
        _check_runs(findings, schedule, own, now_ms=now_ms)
        _check_cursor(findings, schedule, own)
        verdicts.append(
            _check_missing(findings, schedule, own, since_ms=since_ms, limit=max_occurrences),
        )
    return verdicts


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
        _check_occurrence(findings, schedule, run)
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


def _is_occurrence(definition: ScheduleDefinition, at_ms: int) -> bool:
    return next_occurrence_ms(definition.cron, definition.timezone, at_ms - 1) == at_ms


def _first_possible(schedule: Schedule, *, strictly_after_creation: bool) -> int:
    """Return the schedule's first occurrence: after creation and at or after `start_at_ms`.

    Strictly after creation bounds the `missing` range. The sanity bound (not strict) allows
    `_CREATION_SLACK_MS` before `created_at_ms`: the admin computes the first cursor from a clock
    read a moment before the row's creation time is sampled, so an occurrence in between is a
    legitimate first cursor.
    """
    definition = schedule.definition
    if strictly_after_creation:
        after = schedule.created_at_ms
    else:
        after = schedule.created_at_ms - _CREATION_SLACK_MS - 1
    if definition.start_at_ms is not None:
        after = max(after, definition.start_at_ms - 1)
    return next_occurrence_ms(definition.cron, definition.timezone, after)


def _check_occurrence(findings: Findings, schedule: Schedule, run: Run) -> None:
    definition = schedule.definition
    at = run.scheduled_for_ms
    if not _is_occurrence(definition, at):
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, which is not an occurrence of {definition.cron!r}"
            f" in {definition.timezone}",
        )
    elif at < _first_possible(schedule, strictly_after_creation=False):
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, before the schedule's first possible occurrence"
            f" (created at {schedule.created_at_ms}, start_at_ms {definition.start_at_ms},"
            f" slack {_CREATION_SLACK_MS} ms)",
        )
    if definition.end_at_ms is not None and at > definition.end_at_ms:
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, after end_at_ms {definition.end_at_ms}",
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
    if cursor < _first_possible(schedule, strictly_after_creation=False):
        problems.append(
            f"is before the first possible occurrence (created at {schedule.created_at_ms})"
        )
    if (
        schedule.state == "active"
        and definition.end_at_ms is not None
        and cursor > definition.end_at_ms
    ):
        problems.append(f"passed end_at_ms {definition.end_at_ms} but the schedule is still active")
    for problem in problems:
        findings.add("cursor", schedule.id, f"cursor {cursor} {problem}")


def _range_end(schedule: Schedule, runs: Sequence[Run]) -> int | None:
    """Return the exclusive end of the decided occurrences (see the module docstring)."""
    if schedule.state in ("active", "paused") and schedule.next_due_at_ms is not None:
        return schedule.next_due_at_ms
    if schedule.state == "exhausted" and schedule.definition.end_at_ms is not None:
        return schedule.definition.end_at_ms + 1
    latest = max((run.scheduled_for_ms for run in runs), default=None)
    return None if latest is None else latest + 1


def _occurrences(definition: ScheduleDefinition, start: int, end: int, limit: int) -> Iterator[int]:
    at = start
    produced = 0
    while at < end and produced < limit:
        yield at
        produced += 1
        at = next_occurrence_ms(definition.cron, definition.timezone, at)


def _check_missing(
    findings: Findings,
    schedule: Schedule,
    runs: Sequence[Run],
    *,
    since_ms: int | None,
    limit: int,
) -> ScheduleVerdict:
    definition = schedule.definition
    start = _first_possible(schedule, strictly_after_creation=True)
    if since_ms is not None and since_ms > start:
        start = next_occurrence_ms(definition.cron, definition.timezone, since_ms - 1)
    end = _range_end(schedule, runs)
    occurrences = list(_occurrences(definition, start, end, limit + 1)) if end is not None else []
    truncated = len(occurrences) > limit
    occurrences = occurrences[:limit]
    admitted_at = sorted({run.scheduled_for_ms for run in runs})
    # The earliest commit among the runs of each occurrence: the bound on the deciding claim.
    first_commit: dict[int, int] = {}
    for run in runs:
        known = first_commit.get(run.scheduled_for_ms)
        first_commit[run.scheduled_for_ms] = (
            run.created_at_ms if known is None else min(known, run.created_at_ms)
        )
    missing = [
        at
        for at in occurrences
        if at not in first_commit and _must_admit(schedule, at, admitted_at, first_commit)
    ]
    policy = definition.misfire_policy
    if (
        policy is MisfirePolicy.FIRE_ONCE
        and occurrences
        and not truncated
        and occurrences[-1] not in first_commit
        and occurrences[-1] not in missing
    ):
        missing.append(occurrences[-1])
    for at in missing:
        findings.add(
            "missing",
            schedule.id,
            f"occurrence {at} has no run, but the {policy.value} policy had to admit it"
            f" (grace {definition.misfire_grace_ms} ms)",
        )
    in_range = [at for at in admitted_at if occurrences and occurrences[0] <= at <= occurrences[-1]]
    admitted_total = len(admitted_at)
    expected = (
        len(occurrences) + (admitted_total - len(in_range))
        if policy is MisfirePolicy.CATCH_UP
        else admitted_total + len(missing)
    )
    return ScheduleVerdict(
        schedule_id=schedule.id,
        name=schedule.name,
        state=schedule.state,
        misfire_policy=policy.value,
        range_start_ms=start if end is not None else None,
        range_end_ms=end,
        occurrences=len(occurrences),
        expected=expected,
        admitted=admitted_total,
        duplicated=len(runs) - admitted_total,
        early=sum(1 for run in runs if run.created_at_ms < run.scheduled_for_ms),
        missing=len(missing),
        truncated=truncated,
    )


def _must_admit(
    schedule: Schedule,
    at: int,
    admitted_at: Sequence[int],
    first_commit: dict[int, int],
) -> bool:
    definition = schedule.definition
    if definition.misfire_policy is MisfirePolicy.CATCH_UP:
        return True
    index = bisect.bisect_right(admitted_at, at)
    if index == len(admitted_at):
        return False
    return first_commit[admitted_at[index]] - at <= definition.misfire_grace_ms
