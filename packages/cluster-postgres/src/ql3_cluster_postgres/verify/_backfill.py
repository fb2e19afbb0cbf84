"""The `backfill` rule: each backfilled Run (migration 0011) fills an occurrence nothing else did.

A backfilled Run is the Run of its occurrence, admitted late on purpose. Its occurrence is
accounted for by the skip record it supersedes (the record stays), or it lies before the
schedule's first cursor and its request asked for that (`include_before_creation`); so the
accounting walk leaves these Runs out (`_stream`) and this rule judges them: the request exists
and is of the same schedule, the record it names is of the same schedule and covers its instant,
the instant is an occurrence of the revision it belongs to (computed with that revision's zone
rules), and no other Run holds the occurrence. Verify thus accepts an occurrence that has a skip
record and a backfilled Run linked to it, and nothing else twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import next_occurrence_ms

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ._records import Revision
    from ._report import Findings

__all__ = ["check_backfill_runs"]


def _holding(revisions: Sequence[Revision], at_ms: int) -> Revision | None:
    """Return the revision whose range holds `at_ms` (the last whose first cursor is not after)."""
    held = revisions[0] if revisions else None
    for revision in revisions:
        if revision.first_cursor_ms is not None and revision.first_cursor_ms <= at_ms:
            held = revision
    return held


def _off_cron(revision: Revision | None, at_ms: int) -> str | None:
    """Say why `at_ms` is no occurrence of `revision` (None: it is one, or cannot be judged)."""
    if revision is None or revision.definition is None or revision.rules is None:
        return None  # the `revision` rule reports a revision that cannot be read
    definition = revision.definition
    cron, zone = definition.cron, definition.timezone
    if next_occurrence_ms(cron, zone, at_ms - 1, rules=revision.rules) == at_ms:
        return None
    return (
        f"is not an occurrence of {definition.cron!r} in {definition.timezone}"
        f" (revision {revision.revision})"
    )


def _request(row: Mapping[str, Any]) -> list[str]:
    """Say what is wrong with the backfill request a backfilled Run names."""
    if row["request_schedule_id"] is None:
        return [f"names backfill request {row['backfill_id']}, which does not exist"]
    if row["request_schedule_id"] != row["schedule_id"]:
        return [
            f"names backfill request {row['backfill_id']} of schedule {row['request_schedule_id']}"
        ]
    return []


def _problems(row: Mapping[str, Any], revisions: Sequence[Revision]) -> list[str]:
    at, schedule_id = row["scheduled_for_ms"], row["schedule_id"]
    problems = _request(row)
    skip_id = row["supersedes_skip_id"]
    first = revisions[0].first_cursor_ms if revisions else None
    if skip_id is not None:
        if row["skip_schedule_id"] != schedule_id:
            problems.append(f"supersedes skip record {skip_id}, which is not of its schedule")
        elif not row["first_skipped_ms"] <= at <= row["last_skipped_ms"]:
            problems.append(
                f"supersedes skip record {skip_id} [{row['first_skipped_ms']},"
                f" {row['last_skipped_ms']}], which does not cover its occurrence"
            )
        else:
            off = _off_cron(_holding(revisions, row["first_skipped_ms"]), at)
            if off is not None:
                problems.append(off)
    elif first is None or at >= first or row["include_before_creation"] is not True:
        problems.append(
            "supersedes no skip record and is not a requested occurrence before the schedule's"
            f" first cursor ({first})"
        )
    else:
        off = _off_cron(revisions[0], at)
        if off is not None:
            problems.append(off)
    if row["runs_at_occurrence"] != 1:
        problems.append(f"shares its occurrence with {row['runs_at_occurrence'] - 1} other Run(s)")
    if row["created_at_ms"] < at:
        problems.append(f"was admitted at {row['created_at_ms']}, before its occurrence")
    return problems


def check_backfill_runs(
    findings: Findings,
    rows: Iterable[Mapping[str, Any]],
    revisions: Mapping[int, Sequence[Revision]],
    judged: set[int],
) -> dict[int, frozenset[int]]:
    """Report each backfilled Run that is not justified; return each schedule's backfilled instants.

    Only schedules in `judged` are judged (a quarantined one is reported by `invalid_schedule`);
    the instants returned are left out of the accounting walk of their schedule.
    """
    instants: dict[int, set[int]] = {}
    for row in rows:
        schedule_id = row["schedule_id"]
        instants.setdefault(schedule_id, set()).add(row["scheduled_for_ms"])
        if schedule_id not in judged:
            continue
        for problem in _problems(row, revisions.get(schedule_id, ())):
            findings.add(
                "backfill",
                schedule_id,
                f"backfilled run {row['id']} at {row['scheduled_for_ms']} {problem}",
            )
    return {schedule_id: frozenset(found) for schedule_id, found in instants.items()}
