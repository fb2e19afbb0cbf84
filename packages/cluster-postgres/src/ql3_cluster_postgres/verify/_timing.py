"""The time rules of `verify_history`: `stall`, `late`, `misfire_policy`, and skip records' writing.

They judge the history against the replicas' lease (`lease_ms`), so they run only when the
caller names one: `ql3 verify` always does (its `--lease-ms`, the replicas' default unless told);
a library caller that passes none gets the rules that need no allowance. Each rule's meaning is
in its module (`_stall`, `_lateness`); this one reads their rows in the check's
snapshot and hands them over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg.rows import dict_row

from ._lateness import check_catch_up, check_lateness, lateness_from_row
from ._stall import check_skip_commits, check_stall

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._reader import SnapshotReader
    from ._records import Revision, Schedule
    from ._report import Findings, ScheduleLateness

__all__ = ["check_timing"]


def check_timing(  # one snapshot's reader, and what the other rules already read from it
    reader: SnapshotReader,
    findings: Findings,
    schedules: Sequence[Schedule],
    revisions: Mapping[int, Sequence[Revision]],
    *,
    as_of_ms: int,
    lease_ms: int,
) -> tuple[ScheduleLateness, ...]:
    """Apply the time rules; return each schedule's lateness distribution."""
    judged = {schedule.id: revisions.get(schedule.id, ()) for schedule in schedules}
    for schedule in schedules:
        check_stall(findings, schedule, judged[schedule.id], as_of_ms=as_of_ms, lease_ms=lease_ms)
    check_lateness(
        findings, reader.stream("verify_timing_runs", dict_row), judged, lease_ms=lease_ms
    )
    check_catch_up(findings, reader.stream("verify_catch_up_claims", dict_row), judged)
    check_skip_commits(
        findings, reader.stream("verify_skip_commits", dict_row), set(judged), lease_ms=lease_ms
    )
    return tuple(
        lateness_from_row(row)
        for row in reader.rows("verify_lateness_stats")
        if row["schedule_id"] in judged
    )
