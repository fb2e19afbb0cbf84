"""The `alert` rule of `verify_history`: alerts recorded exactly once, each with its condition.

An alert (migration 0013) is a fact the database recorded once per schedule, kind and subject,
by its clock. What is recorded must hold against the history it is about, and for a schedule
that asked for a kind (from when it asked) the history must not hold the condition without the
alert. `verify_alerts_recorded.sql` and `verify_alerts_missing.sql` judge it all and return the
violations only; this module words them. A `missed` alert missing where nothing checked in time
(every Coordinator and worker down past the bound) is reported too: then nobody was told.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._report import Findings

__all__ = ["check_alerts"]

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
