"""`missed` alerts, one per occurrence: the cron half of the work SQL cannot do (migration 0013).

The due-alerts probe (`ql3.record_due_alerts_v1`, one statement, sent by every worker poll and
every idle Coordinator) records the `missed` alert of each overdue schedule's cursor and returns,
per overdue schedule, what the occurrences after it are computed from: the definition in force,
the latest occurrence alerted so far (`after_ms`), the latest instant an occurrence may have to
be missed now (`bound_ms`, from the database clock: rule zero holds, no local time is read) and
the recorded zone rules version. `record_missed` computes those occurrences with the cron engine
and hands them to `ql3.record_missed_alerts_v1`, which re-checks them all under the database
clock. At most `MISSED_PER_CALL` occurrences a call over all schedules, oldest cursor first: one
call stays short (a Coordinator sends it from its idle poll), and the next continues after the
last one recorded; every overdue schedule has its cursor's alert at once whatever the backlog.
Workers (`AlertIngress`) and Coordinators (the repository) both call this one function: the
occurrences are computed in one place.

Only rules of the recorded version compute: a caller without them (`rules_for` returns None, or
rules of another version) computes nothing, and only the cursor's alert is recorded, which is
what the probe already did. An unreadable definition (a cron or zone this engine refuses) is
logged and left alone the same way: the schedule is quarantined by the Coordinator that claims it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ql3_runtime_core import QL3Error, log_event, occurrences_after_ms

from ql3_cluster_postgres._alerts import RecordedAlert

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ql3_runtime_core import ZoneRules

__all__ = ["MISSED_PER_CALL", "OverdueSchedule", "missed_occurrences", "record_missed"]

logger = logging.getLogger(__name__)

# ql3.record_missed_alerts_v1 refuses more in one call; record_missed hands over no more in all.
MISSED_PER_CALL: Final = 1000
# record_due_alerts_v1's rows that are not alerts: a schedule whose occurrences are to compute.
OVERDUE: Final = "overdue"


class OverdueSchedule(NamedTuple):
    """One 'overdue' row of the probe, read by column name (`sql/record_due_alerts.sql`)."""

    schedule_id: int
    cursor_ms: int
    after_ms: int
    bound_ms: int
    cron: str
    timezone: str
    start_at_ms: int | None
    end_at_ms: int | None
    zone_rules_version: str | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> OverdueSchedule:
        """Take the fields of a probe row read by name (a dict row)."""
        return cls(**{name: row[name] for name in cls._fields})


def missed_occurrences(
    overdue: OverdueSchedule, rules: ZoneRules, limit: int = MISSED_PER_CALL
) -> list[int]:
    """Return up to `limit` occurrences in (after_ms, bound_ms] within the window, oldest first.

    The caller has checked that `rules` are the recorded version; an occurrence past the
    definition's end is none, and the cursor is never before its start.
    """
    found: list[int] = []
    last = overdue.bound_ms
    if overdue.end_at_ms is not None:
        last = min(last, overdue.end_at_ms)
    if overdue.after_ms >= last:
        return found
    start = overdue.after_ms
    if overdue.start_at_ms is not None:
        start = max(start, overdue.start_at_ms - 1)
    for occurrence in occurrences_after_ms(overdue.cron, overdue.timezone, start, rules=rules):
        if occurrence > last or len(found) >= limit:
            break
        found.append(occurrence)
    return found


def record_missed(
    rows: Iterable[Mapping[str, Any]],
    rules_for: Callable[[str], ZoneRules | None],
    record: Callable[[Mapping[str, Any]], list[dict[str, Any]]],
) -> list[RecordedAlert]:
    """Return the alerts of probe `rows`, after recording each overdue schedule's occurrences.

    Args:
        rows: the rows of `sql/record_due_alerts.sql`.
        rules_for: the caller's zone rules when they are the given (recorded) version, else None.
        record: sends `sql/record_missed_alerts.sql` with these parameters; returns its rows.

    """
    recorded: list[RecordedAlert] = []
    budget = MISSED_PER_CALL
    for row in rows:
        if row["kind"] != OVERDUE:
            recorded.append(RecordedAlert.model_validate(_alert_fields(row)))
            continue
        overdue = OverdueSchedule.of(row)
        version = overdue.zone_rules_version
        rules = None if version is None else rules_for(version)
        if budget <= 0 or rules is None or rules.version != version:
            continue  # only the cursor's alert (the probe recorded it), this call
        try:
            occurrences = missed_occurrences(overdue, rules, budget)
        except QL3Error as exc:
            log_event(
                logger,
                logging.WARNING,
                "alerts.missed_unreadable",
                schedule_id=overdue.schedule_id,
                reason=str(exc),
            )
            continue
        if not occurrences:
            continue
        budget -= len(occurrences)
        params = {
            "schedule_id": overdue.schedule_id,
            "cursor_ms": overdue.cursor_ms,
            "zone_rules_version": version,
            "occurrences": occurrences,
        }
        recorded.extend(RecordedAlert.model_validate(new) for new in record(params))
    return recorded


def _alert_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name in ("alert_id", "kind", "schedule_id", "subject_key")}
