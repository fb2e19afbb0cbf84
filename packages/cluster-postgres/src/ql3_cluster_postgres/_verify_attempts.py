"""The `attempts` rule of `verify_history` (issue 13): what workers did is consistent per Run.

The shape rule checks a run's admission (one first attempt, two events at the commit time);
this one checks everything after it, from the attempts of each run and the events naming them:

- the attempts are numbered 1..n without a gap or a repeat;
- at most one is live (queued or running): the partial UNIQUE index makes a second impossible,
  and the checker looks anyway;
- each attempt after the first follows one that ended without success (failed, timed_out,
  abandoned): nothing runs again after a success, and no successor appears while its
  predecessor is live;
- each attempt's events tell its own story: exactly one `attempt.queued`, one `attempt.running`
  per time a worker took it (every take but the one it is in, or ended in, was released:
  `attempt.released`), and exactly one final event, of its final state (none while live).

Pure: it judges rows `_verify` read in its snapshot and never touches the database.
"""

from __future__ import annotations

from itertools import groupby, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._verify_report import Findings

__all__ = ["check_attempts"]

_LIVE: Final = frozenset({"queued", "running"})
# A successor is queued only by the statement that ends its predecessor in one of these.
_RETRIED_AFTER: Final = frozenset({"failed", "timed_out", "abandoned"})


def check_attempts(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each run whose attempts or attempt events are inconsistent (rows by run, number)."""
    for run_id, group in groupby(rows, key=itemgetter("run_id")):
        attempts = list(group)
        schedule_id = attempts[0]["schedule_id"]
        for problem in _run_problems(attempts):
            findings.add("attempts", schedule_id, f"run {run_id}: {problem}")


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
    takes = attempt["released_events"] + (0 if attempt["state"] == "queued" else 1)
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
