"""The `attempts` rule of `verify_history` (DESIGN §10): what workers did is consistent per Run.

The shape rule checks a run's admission (one first attempt, two events at the commit time);
this one checks everything after it, from the attempts of each run and the events naming them:

- the attempts are numbered 1..n without a gap or a repeat;
- at most one is live (queued or running): the partial UNIQUE index makes a second impossible,
  and the checker looks anyway;
- each attempt after the first follows one that ended without success (failed, timed_out,
  abandoned): nothing runs again after a success, and no successor appears while its
  predecessor is live;
- in time (`check_attempt_timing`, from `verify_attempt_timing.sql`): no attempt numbered above
  its task's `max_attempts`; no attempt started before its predecessor ended (two attempts of one
  Run live at once: their [started, finished) overlap) nor before that end plus the task's retry
  backoff; no success recorded after a later attempt started. The task's current
  `max_attempts` and backoff are the ones judged with: after an operator raises either, earlier
  retries may be reported, and the finding names both numbers so that this can be told apart;
- each attempt's events tell its own story: exactly one `attempt.queued`, one `attempt.running`
  per time a worker took it (every take but the one it is in, or ended in, was released:
  `attempt.released`), and exactly one final event, of its final state (none while live); a
  skipped attempt (overlap skip) was never taken, a cancelled one (overlap replace) only if it
  has a start;
- every event that names an attempt names one of its own run's (an event naming another run's
  attempt, or no attempt at all, is reported on the run it belongs to).

Pure: it judges rows `_check` read in its snapshot and never touches the database.
"""

from __future__ import annotations

from itertools import groupby, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._report import Findings

__all__ = ["check_attempt_timing", "check_attempts"]

_LIVE: Final = frozenset({"queued", "running"})
# A successor is queued only by the statement that ends its predecessor in one of these.
_RETRIED_AFTER: Final = frozenset({"failed", "timed_out", "abandoned"})


def check_attempts(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each run whose attempts or attempt events are inconsistent (rows by run, number).

    A row with `attempt_rows` 0 is no attempt of the run: the events of the run that name that
    attempt id (`verify_attempts.sql`).
    """
    for run_id, group in groupby(rows, key=itemgetter("run_id")):
        rows_of_run = list(group)
        schedule_id = rows_of_run[0]["schedule_id"]
        attempts = [row for row in rows_of_run if row["attempt_rows"]]
        problems = _run_problems(attempts)
        problems.extend(_foreign_events(row) for row in rows_of_run if not row["attempt_rows"])
        for problem in problems:
            findings.add("attempts", schedule_id, f"run {run_id}: {problem}")


def _foreign_events(row: dict[str, Any]) -> str:
    """Describe the events of a run that name an attempt id that is not one of its attempts."""
    counts = {
        "attempt.queued": row["queued_events"],
        "attempt.running": row["running_events"],
        "attempt.released": row["released_events"],
        "final": row["final_events"],
    }
    kinds = ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)
    what = kinds or "of other kinds"
    return f"its event(s) ({what}) name attempt {row['id']}, which is not one of its attempts"


def _run_problems(attempts: Sequence[dict[str, Any]]) -> list[str]:
    numbers = [a["attempt_number"] for a in attempts]
    problems = []
    if numbers != list(range(1, len(attempts) + 1)):
        problems.append(f"attempts are numbered {numbers}, not 1..{len(attempts)}")
    live = [a["id"] for a in attempts if a["state"] in _LIVE]
    if len(live) > 1:
        problems.append(f"{len(live)} live attempts {live} (at most one)")
    for before, after in pairwise(attempts):
        if before["state"] not in _RETRIED_AFTER:
            problems.append(
                f"attempt {after['id']} follows attempt {before['id']} in state"
                f" {before['state']!r} (only after failed, timed_out or abandoned)"
            )
    problems.extend(problem for attempt in attempts for problem in _event_problems(attempt))
    return problems


def _event_problems(attempt: dict[str, Any]) -> list[str]:
    """List what is wrong with the events of one attempt, given its state."""
    where = f"attempt {attempt['id']} ({attempt['state']})"
    final = attempt["state"] not in _LIVE
    problems = []
    if attempt["queued_events"] != 1:
        problems.append(f"{where} has {attempt['queued_events']} attempt.queued events (1)")
    takes = attempt["released_events"] + (1 if _taken(attempt) else 0)
    if attempt["running_events"] != takes:
        problems.append(
            f"{where} has {attempt['running_events']} attempt.running events for"
            f" {attempt['released_events']} release(s) (expected {takes})"
        )
    expected_final = 1 if final else 0
    if attempt["final_events"] != expected_final or (
        final and attempt["final_kind"] != f"attempt.{attempt['state']}"
    ):
        problems.append(
            f"{where} has {attempt['final_events']} final event(s)"
            f" ({attempt['final_kind'] or 'none'}; expected {expected_final}"
            f"{' attempt.' + attempt['state'] if final else ''})"
        )
    return problems


def _taken(attempt: dict[str, Any]) -> bool:
    """Whether the attempt's state says a worker took it (and did not hand it back).

    Skipped (overlap skip) never started; a cancelled one (overlap replace) was taken only if
    it has a start (one cancelled while queued never was).
    """
    state = attempt["state"]
    if state in {"queued", "skipped"}:
        return False
    return state != "cancelled" or attempt["started_at_ms"] is not None


def check_attempt_timing(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report later attempts numbered past `max_attempts` or started too early (see the top)."""
    for row in rows:
        for problem in _timing_problems(row):
            findings.add(
                "attempts",
                row["schedule_id"],
                f"run {row['run_id']}: attempt {row['id']} {problem}",
            )


def _timing_problems(row: dict[str, Any]) -> list[str]:
    number, limit = row["attempt_number"], row["max_attempts"]
    problems = []
    if number > limit:
        problems.append(f"is number {number}, above its task's max_attempts {limit}")
    started, before_end = row["started_at_ms"], row["before_finished_ms"]
    if started is None or row["before_started_ms"] is None:
        return problems
    before = f"attempt {row['before_id']} ({row['before_state']})"
    if before_end is None or started < before_end:
        if row["before_state"] == "succeeded" and before_end is not None:
            problems.append(f"started at {started}, before {before} succeeded at {before_end}")
        else:
            ended = "is still live" if before_end is None else f"ended at {before_end}"
            problems.append(f"started at {started} while {before} was live (it {ended})")
    elif started < before_end + row["retry_backoff_ms"]:
        problems.append(
            f"started at {started}, {started - before_end} ms after {before} ended at"
            f" {before_end}: before its task's retry backoff of {row['retry_backoff_ms']} ms"
        )
    return problems
