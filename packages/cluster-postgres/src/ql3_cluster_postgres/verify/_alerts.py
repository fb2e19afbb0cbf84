"""The `alert` rule of `verify_history`: alerts recorded exactly once, each with its condition.

An alert (migration 0013) is a fact the database recorded once per schedule, kind and subject,
by its clock. What is recorded must hold against the history it is about, and for a schedule
that asked for a kind (from when it asked) the history must not hold the condition without the
alert. `verify_alerts_recorded.sql` and `verify_alerts_missing.sql` judge it all and return the
violations only; this module words them. A `missed` alert missing where nothing checked in time
(every Coordinator and worker down past the bound) is reported too: then nobody was told. What
SQL cannot judge is judged here with the cron engine (`check_missed_occurrences`): a `missed`
alert (one per occurrence) must name an occurrence of the definition in force at that instant,
recomputed from the schedule's revisions and their zone rules, never from anything the
recording path computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ql3_runtime_core import QL3Error, next_occurrence_ms

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ._records import Revision
    from ._report import Findings

__all__ = ["check_alerts", "check_missed_occurrences"]

_TEXT: Final = {
    "duplicate": "{kind} alert for subject {subject} recorded {at_ms} times (first alert"
    " {alert_id}): an alert is recorded once",
    "missed_without_condition": "missed alert {alert_id} for occurrence {subject} raised at"
    " {at_ms}, before its bound or after a Run or skip record had decided it",
    "late_without_condition": "late alert {alert_id} for run {subject} raised at {at_ms}, before"
    " its deadline or for a Run that succeeded by it",
    "failed_without_condition": "failed alert {alert_id} for run {subject} raised at {at_ms},"
    " but the run's attempts were not exhausted by then",
    "paused_without_condition": "paused alert {alert_id} names pause {subject}, which is no"
    " pause after failures of the schedule",
    "failed_missing": "run {subject} exhausted its attempts at {at_ms} with no failed alert",
    "paused_missing": "pause {subject} after failures at {at_ms} has no paused alert",
    "late_missing": "run {subject} scheduled for {at_ms} did not succeed by its deadline and has"
    " no late alert",
    "missed_missing": "occurrence {subject} was decided at {at_ms}, past its bound, with no"
    " missed alert (nobody checked in time?)",
}


def check_alerts(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each violation the `verify_alerts_*.sql` statements returned, in its words."""
    for row in rows:
        detail = _TEXT[row["problem"]].format(
            kind=row["kind"],
            subject=row["subject_key"],
            alert_id=row["alert_id"],
            at_ms=row["at_ms"],
        )
        findings.add("alert", row["schedule_id"], detail)


def check_missed_occurrences(
    findings: Findings,
    rows: Iterable[dict[str, Any]],
    revisions: Mapping[int, Sequence[Revision]],
) -> None:
    """Report each `missed` alert that names no occurrence of its schedule's definition.

    The definition judged with is the revision in force at the instant: the last one whose
    first cursor is at or before it (a revision's range runs to the next one's first cursor).
    Schedules without readable revisions are reported by rule `revision`, not here.
    """
    for row in rows:
        schedule_id, alert_id, at_ms = row["schedule_id"], row["alert_id"], row["occurrence_ms"]
        held = revisions.get(schedule_id)
        if not held:
            continue
        problem = _not_an_occurrence(held, at_ms)
        if problem is not None:
            findings.add(
                "alert",
                schedule_id,
                f"missed alert {alert_id} names {at_ms}, which is no occurrence of the"
                f" schedule: {problem}",
            )


def _not_an_occurrence(revisions: Sequence[Revision], at_ms: int) -> str | None:
    """Say why `at_ms` is no occurrence of the revisions' definitions; None when it is one."""
    placed = [r for r in revisions if r.first_cursor_ms is not None and r.first_cursor_ms <= at_ms]
    if not placed:
        return "it is before the first revision's first cursor"
    revision = placed[-1]
    definition, rules = revision.definition, revision.rules
    if definition is None or rules is None:
        return None  # unreadable or unjudgeable: rule `revision` reports the revision itself
    start, end = definition.start_at_ms, definition.end_at_ms
    if (start is not None and at_ms < start) or (end is not None and at_ms > end):
        return f"it is outside revision {revision.revision}'s window [{start}, {end}]"
    try:
        due = next_occurrence_ms(definition.cron, definition.timezone, at_ms - 1, rules=rules)
    except QL3Error as exc:
        return f"revision {revision.revision}'s definition has none ({exc})"
    if due != at_ms:
        return (
            f"revision {revision.revision} ({definition.cron!r} in {definition.timezone}) has its"
            f" next occurrence after {at_ms - 1} at {due}"
        )
    return None
