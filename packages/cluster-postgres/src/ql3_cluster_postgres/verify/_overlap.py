"""The `overlap` rule of `verify_history`: what the overlap policy decided (DESIGN §10, §14).

The worker's take decides a schedule's overlap policy (migration 0009). What it writes must hold
together, and the attempts' database times must show that the policy held:

- a skip record of reason `overlap` is one occurrence whose cron Run never executed (no attempt
  of it was started) and whose attempt ended `skipped`; and every cron Run whose attempt ended
  `skipped` has that record. Such an occurrence is accounted for once: by its Run (the record is
  kept out of the accounting walk) and counted apart in the report (`overlap_skipped`).
- under a cap (`skip`, `replace`, or `allow` with `max_running`: the task's policy), at no
  instant were more attempts of the schedule executing than its `max_running`, judged from
  [started_at_ms, finished_at_ms) (a
  running attempt until the snapshot's now, a cancelled one until its cancellation, an
  abandoned one until it was abandoned: a killed worker's attempt stays live until then). The
  task's current policy and cap are the ones judged with: after an operator loosens either,
  earlier history may be reported, and the finding names the cap.

Manual Runs count as live Runs of their schedule; one skipped for overlap has no record (it is
no occurrence). `verify_overlap.sql` judges it all and returns the violations only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._report import Findings

__all__ = ["check_overlap"]

_TEXT: Final = {
    "record_without_run": "overlap skip record {skip_id} at {at_ms} has no cron run at that"
    " occurrence (a take that skips a Run writes both)",
    "record_run_executed": "overlap skip record {skip_id} at {at_ms} names run {run_id}, which"
    " a worker started: an executed Run was also recorded skipped",
    "record_run_not_skipped": "overlap skip record {skip_id} at {at_ms} names run {run_id},"
    " whose attempt did not end skipped",
    "skipped_without_record": "run {run_id} at {at_ms} ended skipped with no overlap skip record",
    "too_many_live": "run {run_id} started at {at_ms} while {others} other attempt(s) of the"
    " schedule were executing: {live} at once, its max_running is {cap}",
}


def check_overlap(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each violation `verify_overlap.sql` returned, in its words."""
    for row in rows:
        live = row["live"]
        detail = _TEXT[row["problem"]].format(
            skip_id=row["skip_id"],
            run_id=row["run_id"],
            at_ms=row["at_ms"],
            live=live,
            others=None if live is None else live - 1,
            cap=row["cap"],
        )
        findings.add("overlap", row["schedule_id"], detail)
