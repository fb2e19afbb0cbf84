"""The rules of `verify_history` (described in `_verify`'s docstring) that judge rows one by one.

They judge rows of one snapshot as `_check` streams them and never touch the database, so
`_check` stays about reading and this module about judging. What they keep per schedule is a
few numbers (`RunCounts`), never the runs. Cron math comes from `ql3_runtime_core` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import ScheduleDefinition, next_occurrence_ms, quarantine_reason

from ql3_cluster_postgres._definitions import DefinitionColumns, definition_from_columns

from ._records import RunCounts, Schedule
from ._report import ScheduleVerdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ZoneRules

    from ._accounting import Accounting
    from ._report import Findings

__all__ = [
    "SHAPE_COUNTS",
    "check_claim",
    "check_invalid",
    "check_schedule_row",
    "check_sequence",
    "report_orphan",
    "report_shape",
    "report_stray_run",
    "schedule_from_row",
    "schedule_verdict",
]

# The admission shape (DESIGN §5), as `verify_shape.sql` counts it per run id: each count's
# column, what a well-formed run has, and how a finding names it; and the run's rows must all
# carry its commit time. The SQL returns only the run ids where something differs; a new kind of
# row (a worker's later attempt, say) is one more slot there and one more line here.
SHAPE_COUNTS: tuple[tuple[str, int, str], ...] = (
    ("first_attempts", 1, "first attempt(s)"),
    ("run_admitted", 1, "run.admitted event(s)"),
)


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
        definition_from_columns(DefinitionColumns.of(row))
    except Exception as exc:  # noqa: BLE001  # any unreadable row is a finding, not a crash
        return quarantine_reason(exc)
    return None


def schedule_from_row(row: dict[str, Any]) -> Schedule:
    definition = definition_from_columns(DefinitionColumns.of(row))
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


def report_shape(findings: Findings, row: dict[str, Any]) -> None:
    """Report one run whose admission rows are not the shape `SHAPE_COUNTS` describes."""
    counts = ", ".join(
        f"{row[column]} {label} (expected {expected})" for column, expected, label in SHAPE_COUNTS
    )
    attempts = row["first_attempts"] + row["later_attempts"]
    queued = f"{row['attempt_queued']} attempt.queued event(s) for {attempts} attempt(s)"
    first, last, created = row["admission_first_ms"], row["admission_last_ms"], row["created_at_ms"]
    timing = (
        "all at its commit time"
        if first in {None, created} and last in {None, created}
        else f"written from {first} to {last}, not all at its commit time {created}"
    )
    detail = f"run {row['id']} has {counts}, {queued}; its admission rows are {timing}"
    findings.add("shape", row["schedule_id"], detail)


def report_orphan(findings: Findings, row: dict[str, Any]) -> None:
    """Report an attempt or event that points at no run."""
    findings.add("shape", None, f"{row['kind']} {row['id']} points at missing run {row['run_id']}")


def report_stray_run(findings: Findings, row: dict[str, Any]) -> None:
    """Report a run whose task is not its schedule's (`verify_stray_runs.sql`)."""
    findings.add(
        "shape",
        row["schedule_id"],
        f"run {row['id']} has task {row['task_id']}, its schedule has task"
        f" {row['schedule_task_id']}",
    )


def check_claim(findings: Findings, schedule: Schedule, *, now_ms: int, grace_ms: int) -> None:
    expires = schedule.claim_expires_at_ms
    if expires is not None and expires + grace_ms < now_ms:
        findings.add(
            "stale_claim",
            schedule.id,
            f"claim of owner {schedule.claim_owner_id!r} expired at {expires},"
            f" {now_ms - expires} ms before the database clock {now_ms}"
            f" (grace {grace_ms} ms)",
        )


def check_sequence(findings: Findings, row: dict[str, Any], *, now_ms: int) -> bool:
    """Judge one run returned by `verify_run_sequence.sql`; return whether it is early.

    `early`, `future`, and against the run before it in run id order (the order its schedule's
    commits took ids in): `time_backwards` (an earlier commit time) and `order` (an earlier
    occurrence: the cursor moved backwards).
    """
    schedule_id, run_id = int(row["schedule_id"]), int(row["id"])
    at_ms, created_ms = int(row["scheduled_for_ms"]), int(row["created_at_ms"])
    early = created_ms < at_ms
    if early:
        findings.add(
            "early",
            schedule_id,
            f"run {run_id} committed at {created_ms}, {at_ms - created_ms} ms before its"
            f" occurrence {at_ms}",
        )
    if created_ms > now_ms:
        findings.add(
            "future",
            schedule_id,
            f"run {run_id} committed at {created_ms}, {created_ms - now_ms} ms after the"
            f" database clock {now_ms}",
        )
    before_id = row["before_id"]
    if before_id is not None and created_ms < row["before_created_ms"]:
        findings.add(
            "time_backwards",
            schedule_id,
            f"run {run_id} committed at {created_ms}, before run {before_id}"
            f" at {row['before_created_ms']}",
        )
    if before_id is not None and at_ms < row["before_ms"]:
        findings.add(
            "order",
            schedule_id,
            f"run {run_id} admits occurrence {at_ms}, before the occurrence {row['before_ms']}"
            f" of the earlier run {before_id}",
        )
    return early


def check_schedule_row(
    findings: Findings, schedule: Schedule, counts: RunCounts, rules: ZoneRules
) -> None:
    """Check the schedule row against its runs: its commit time, then its cursor (by `rules`)."""
    if counts.newest_id is not None and schedule.updated_at_ms < counts.newest_created_ms:
        findings.add(
            "time_backwards",
            schedule.id,
            f"schedule updated_at_ms {schedule.updated_at_ms} is before the commit time"
            f" {counts.newest_created_ms} of its latest run {counts.newest_id}",
        )
    _check_cursor(findings, schedule, counts.latest_ms, rules)


def schedule_verdict(
    schedule: Schedule, runs: RunCounts, accounting: Accounting
) -> ScheduleVerdict:
    """Sum up one schedule: what it had to admit, admitted, skipped, duplicated and missed."""
    return ScheduleVerdict(
        schedule_id=schedule.id,
        name=schedule.name,
        state=schedule.state,
        misfire_policy=schedule.definition.misfire_policy.value,
        range_start_ms=accounting.range_start_ms,
        range_end_ms=accounting.range_end_ms,
        occurrences=accounting.occurrences,
        expected=accounting.occurrences - accounting.skipped,
        admitted=runs.admitted,
        skipped=accounting.skipped,
        duplicated=runs.runs - runs.admitted,
        early=runs.early,
        missing=accounting.missing,
    )


def _is_occurrence(definition: ScheduleDefinition, at_ms: int, rules: ZoneRules) -> bool:
    return next_occurrence_ms(definition.cron, definition.timezone, at_ms - 1, rules=rules) == at_ms


def _check_cursor(
    findings: Findings, schedule: Schedule, latest: int | None, rules: ZoneRules
) -> None:
    """Check an active or paused schedule's cursor against its cron and its latest run."""
    cursor = schedule.next_due_at_ms
    if schedule.state not in ("active", "paused") or cursor is None:
        return
    definition = schedule.definition
    problems = []
    if latest is not None and cursor <= latest:
        problems.append(f"is not after the latest admitted occurrence {latest}")
    if not _is_occurrence(definition, cursor, rules):
        problems.append(f"is not an occurrence of {definition.cron!r} in {definition.timezone}")
    if (
        schedule.state == "active"
        and definition.end_at_ms is not None
        and cursor > definition.end_at_ms
    ):
        problems.append(f"passed end_at_ms {definition.end_at_ms} but the schedule is still active")
    for problem in problems:
        findings.add("cursor", schedule.id, f"cursor {cursor} {problem}")
