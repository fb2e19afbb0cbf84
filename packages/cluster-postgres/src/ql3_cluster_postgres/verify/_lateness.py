"""The `late` and `misfire_policy` rules of `verify_history`, and the lateness per schedule.

A Run's **admission lateness** is its commit time by the database clock (`created_at_ms`) minus
its occurrence. The decision is made with the claim's acquired time and the commit lands before
the claim's lease runs out (DESIGN §3-§5), so a Run committed at `c` was decided at some instant
in `(c - lease, c]`; `lease_ms` is the replicas' lease.

**late**: a Run admitted later than its revision's misfire policy allows.

- `skip` admits on-time occurrences only: at most grace + lease late.
- `fire_once` admits on-time occurrences (grace + lease) and the latest missed one, which may be
  as late as the time to the next occurrence: a Run more than grace + lease late is late when
  the occurrence after it was already due when it was decided (at or before `c - lease`).
- `catch_up` admits every missed occurrence, oldest first, however old: no lateness is too much
  for it; a schedule that falls behind and stays there is the `stall` rule's finding.

**misfire_policy**: each claim's decision over the occurrences it found missed (its span). When
the claim also wrote a skip record its acquired time is known exactly; otherwise only Runs more
than grace + lease late are known to have been missed at it.

- `fire_once` admitted at most one missed occurrence per claim (the rest are in its skip record;
  that the one admitted is the latest is checked by `skip_record`);
- `skip` admitted no occurrence its claim had missed (a stale Run of a claim without a skip record
  is `late`);
- `catch_up` admitted each: one claim's Runs are consecutive occurrences, none left out between
  its first and its last (the occurrence left out is also `missing`: it has neither a Run nor a
  skip record).

Each Run is judged by one of the two rules, never both: a finding is one defect.
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import count_occurrences_ms, next_occurrence_ms

from ._report import ScheduleLateness

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ._records import Revision
    from ._report import Findings

__all__ = ["check_catch_up", "check_lateness", "lateness_from_row"]


def lateness_from_row(row: dict[str, Any]) -> ScheduleLateness:
    """Read one row of `verify_lateness_stats.sql` by name."""
    return ScheduleLateness(
        schedule_id=row["schedule_id"],
        runs=row["runs"],
        p50_ms=row["p50_ms"],
        p99_ms=row["p99_ms"],
        max_ms=row["max_ms"],
    )


def check_lateness(
    findings: Findings,
    rows: Iterable[dict[str, Any]],
    revisions: Mapping[int, Sequence[Revision]],
    *,
    lease_ms: int,
) -> None:
    """Judge the late runs of `verify_timing_runs.sql`, one claim at a time."""
    for (schedule_id, _token), group in groupby(rows, key=itemgetter("schedule_id", "claim_token")):
        if schedule_id in revisions:
            _judge_claim(findings, list(group), revisions[schedule_id], lease_ms)


def _judge_claim(
    findings: Findings, runs: Sequence[dict[str, Any]], revisions: Sequence[Revision], lease: int
) -> None:
    first = runs[0]
    schedule_id, policy, acquired = (
        first["schedule_id"],
        first["misfire_policy"],
        first["claim_acquired_at_ms"],
    )
    missed = [run for run in runs if _missed(run, lease)]
    if policy == "skip":
        for run in missed:
            late = run["created_at_ms"] - run["scheduled_for_ms"]
            if acquired is not None:
                findings.add(
                    "misfire_policy",
                    schedule_id,
                    f"run {run['id']} admits {run['scheduled_for_ms']} under skip, missed at its"
                    f" claim at {acquired} (grace {run['misfire_grace_ms']} ms; skip record"
                    f" {run['skip_id']} of the same claim): skip admits no missed occurrence",
                )
            else:
                findings.add(
                    "late",
                    schedule_id,
                    f"run {run['id']} admits {run['scheduled_for_ms']} {late} ms late; skip allows"
                    f" grace {run['misfire_grace_ms']} + lease {lease} ms",
                )
        return
    if len(missed) > 1:
        ids = [run["id"] for run in missed]
        findings.add(
            "misfire_policy",
            schedule_id,
            f"one claim (token {first['claim_token']}) admitted {len(missed)} missed occurrences"
            f" {missed[0]['scheduled_for_ms']}..{missed[-1]['scheduled_for_ms']} (runs {ids}):"
            " fire_once admits only the latest missed one",
        )
        return
    if missed and acquired is None:
        _judge_fire_once(findings, missed[0], revisions, lease)


def _missed(run: dict[str, Any], lease: int) -> bool:
    """Whether the run's occurrence was missed at its claim (surely, without a skip record)."""
    acquired = run["claim_acquired_at_ms"]
    decided = acquired if acquired is not None else run["created_at_ms"] - lease
    return bool(decided - run["scheduled_for_ms"] > run["misfire_grace_ms"])


def _judge_fire_once(
    findings: Findings, run: dict[str, Any], revisions: Sequence[Revision], lease: int
) -> None:
    revision = next((rev for rev in revisions if rev.revision == run["revision"]), None)
    if revision is None or revision.definition is None or revision.rules is None:
        return  # the `revision` rule reports why this revision cannot be judged
    definition = revision.definition
    at, committed = run["scheduled_for_ms"], run["created_at_ms"]
    following = next_occurrence_ms(definition.cron, definition.timezone, at, rules=revision.rules)
    if following <= committed - lease:
        findings.add(
            "late",
            run["schedule_id"],
            f"run {run['id']} admits {at} {committed - at} ms late, when the occurrence after it"
            f" ({following}) was already due: fire_once allows grace {run['misfire_grace_ms']}"
            f" + lease {lease} ms for any but the latest missed occurrence",
        )


def check_catch_up(
    findings: Findings,
    rows: Iterable[dict[str, Any]],
    revisions: Mapping[int, Sequence[Revision]],
) -> None:
    """Report each catch_up claim whose runs leave out an occurrence between its first and last."""
    for row in rows:
        schedule_id = row["schedule_id"]
        revision = next(
            (rev for rev in revisions.get(schedule_id, ()) if rev.revision == row["revision"]),
            None,
        )
        if revision is None or revision.definition is None or revision.rules is None:
            continue
        definition = revision.definition
        first, last = row["first_ms"], row["last_ms"]
        between = count_occurrences_ms(
            definition.cron, definition.timezone, first, last, rules=revision.rules
        )
        if between > row["runs"]:
            findings.add(
                "misfire_policy",
                schedule_id,
                f"one claim (token {row['claim_token']}) admitted {row['runs']} of the"
                f" {between} occurrences from {first} to {last}: catch_up admits each",
            )
