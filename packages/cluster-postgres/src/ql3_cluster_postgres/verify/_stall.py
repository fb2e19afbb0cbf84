"""The `stall` rule of `verify_history`, and the `skip_record` checks of when a record was written.

Both judge time against an allowance: `lease_ms`, the replicas' claim lease (a commit lands
before its claim expires, DESIGN §5), plus each revision's misfire grace.

**stall.** Accounting (`_accounting`) counts occurrences only up to each schedule's cursor:
a history where every Coordinator stopped an hour ago has no gap before any cursor and would pass.
So by the database clock at verify time (or the fixed instant `as_of_ms`, for a report that can
be repeated), every occurrence due longer ago than lease + grace must already be decided: a Run
or inside a skip record, which is to say before the cursor. A live replica claims a due cursor at
once and takes an expired claim over after one lease, and an on-time occurrence may be admitted
up to its grace late; an active schedule whose cursor lies further behind is not being decided.
The finding names the schedule and the span from its first undecided occurrence (the cursor) to
the instant judged, with how many occurrences in it are overdue.

A `catch_up` schedule working through a backlog longer than one decision's budget stays behind
for several cycles and is reported until it has caught up: by this rule's measure its
occurrences are overdue, which is what an operator needs to know (the same condition as the
`ql3_schedules_overdue` gauge).

Only `active` schedules can stall. A `paused` one is stopped by an operator: its occurrences
are not owed while it is paused, and resuming it places a new cursor after the database time
(a new revision), so nothing before that is ever due. A `retired` one is never claimed again,
an `exhausted` one has no occurrence left (its cursor passed `end_at_ms`), and an `invalid`
one is the `invalid_schedule` rule's finding already.

**skip_record (when written).** A misfire skip record is written by the commit of the claim that
passed its occurrences, at that commit's one clock sample (DESIGN §5, §7). So: its stored
lateness columns are `claim_acquired_at_ms` minus its last and first occurrence; it was written
at or after that claim and before the claim's lease ran out; every Run its claim admitted carries
the same commit time; its last occurrence was already missed (more than the grace late) when it
was written; and it was written while the revision holding its occurrences was live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_runtime_core import count_occurrences_ms

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._records import Revision, Schedule
    from ._report import Findings

__all__ = ["check_skip_commits", "check_stall"]


def check_stall(
    findings: Findings,
    schedule: Schedule,
    revisions: Sequence[Revision],
    *,
    as_of_ms: int,
    lease_ms: int,
) -> None:
    """Report an active schedule whose cursor is more than lease + grace behind `as_of_ms`."""
    cursor = schedule.next_due_at_ms
    if schedule.state != "active" or cursor is None:
        return
    definition = schedule.definition
    grace = definition.misfire_grace_ms
    overdue_until = as_of_ms - lease_ms - grace  # occurrences at or before it must be decided
    if cursor > overdue_until:
        return
    if definition.end_at_ms is not None:
        overdue_until = min(overdue_until, definition.end_at_ms)
    live = revisions[-1] if revisions else None
    rules = live.rules if live is not None else None
    if rules is None:  # the `revision` rule reports why its occurrences cannot be counted
        overdue = "its"
    else:
        count = count_occurrences_ms(
            definition.cron, definition.timezone, cursor, overdue_until, rules=rules
        )
        if not count:
            return
        overdue = f"{count}"
    claim = (
        f"; claimed by {schedule.claim_owner_id!r} until {schedule.claim_expires_at_ms}"
        if schedule.claim_owner_id is not None
        else "; unclaimed"
    )
    findings.add(
        "stall",
        schedule.id,
        f"stalled from {cursor} to {as_of_ms}: cursor {cursor} is more than lease {lease_ms}"
        f" + grace {grace} ms behind {as_of_ms}; {overdue} occurrence(s) from {cursor} to"
        f" {overdue_until} are overdue with neither a run nor a skip record{claim}",
    )


def check_skip_commits(
    findings: Findings, rows: Iterable[dict[str, Any]], judged: set[int], *, lease_ms: int
) -> None:
    """Check each misfire skip record against the database's record of its writing."""
    for row in rows:
        if row["schedule_id"] in judged:
            for problem in _commit_problems(row, lease_ms):
                findings.add(
                    "skip_record",
                    row["schedule_id"],
                    f"skip record {row['id']} [{row['first_skipped_ms']},"
                    f" {row['last_skipped_ms']}] {problem}",
                )


def _commit_problems(row: dict[str, Any], lease_ms: int) -> list[str]:
    acquired, written = row["claim_acquired_at_ms"], row["created_at_ms"]
    first, last = row["first_skipped_ms"], row["last_skipped_ms"]
    problems = []
    # Recomputed here rather than trusted: the columns are what a reader of the table sees.
    stored = (row["lateness_newest_ms"], row["lateness_oldest_ms"])
    if stored != (acquired - last, acquired - first):
        problems.append(
            f"stores lateness {row['lateness_newest_ms']}/{row['lateness_oldest_ms']} ms"
            f" (newest/oldest), its claim at {acquired} makes it {acquired - last}/"
            f"{acquired - first} ms"
        )
    if not acquired <= written < acquired + lease_ms:
        problems.append(
            f"was written at {written}, not within its claim's lease [{acquired},"
            f" {acquired + lease_ms}) (lease {lease_ms} ms)"
        )
    runs_first, runs_last = row["runs_first_ms"], row["runs_last_ms"]
    if row["runs"] and not runs_first == runs_last == written:
        problems.append(
            f"was written at {written}, but the {row['runs']} run(s) of its claim were committed"
            f" at {runs_first}..{runs_last} (one commit writes both at one clock sample)"
        )
    grace = row["misfire_grace_ms"]
    if grace is not None and written - last <= grace:
        problems.append(
            f"was written at {written}, when its last occurrence {last} was still on time"
            f" (grace {grace} ms)"
        )
    born, ended = row["revision_created_ms"], row["revision_ended_ms"]
    if born is not None and (written < born or (ended is not None and written > ended)):
        problems.append(
            f"was written at {written}, outside the life [{born}, {ended}] of revision"
            f" {row['revision']}, whose range holds it"
        )
    return problems
