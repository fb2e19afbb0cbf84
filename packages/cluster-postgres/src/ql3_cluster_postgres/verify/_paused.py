"""The `paused` rule: paused spans and what their resumes wrote (migration 0010, DESIGN §7).

Checked from the spans' side (`verify_pauses.sql`) and the records' side
(`verify_paused_skips.sql`):
- every `paused` skip record lies inside the closed span it names, of its own schedule;
- a span holds at most one `paused` record, counting what the span says it recorded;
- no cron Run was admitted for an occurrence inside a span (from the cursor it held to its end,
  or to the database clock while open) unless the resume's replay admits it: `skip` none,
  `fire_once` only the latest (after the record), `catch_up` any;
- an automatic resume ended at its until and replayed nothing;
- a schedule's spans do not overlap (each starts after the previous one was resumed);
- a pause after failures is preceded by that many consecutive failed Runs: the Run it names
  finished (exhausted) before the pause, and it and the Runs that finished just before it all
  failed. Counting back from the named Run, not from the pause, because two finishes can read the
  clock in one order and commit in the other: a failure committed after the pause is not one the
  pausing trigger could see.
Occurrence accounting itself (each occurrence a Run or inside one skip record) is the accounting
rules' (`_accounting`), which count `paused` records like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._report import Findings

__all__ = ["check_paused_skips", "check_pauses"]

RULE = "paused"


def check_paused_skips(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each `paused` record `verify_paused_skips.sql` found outside its span."""
    for row in rows:
        span = row["pause_id"]
        where = (
            "names no recorded span"
            if row["span_schedule_id"] is None
            else f"lies outside span {span} [{row['first_held_ms']}, {row['end_ms']}]"
            if row["span_schedule_id"] == row["schedule_id"]
            else f"names span {span} of schedule {row['span_schedule_id']}"
        )
        findings.add(
            RULE,
            row["schedule_id"],
            f"paused skip record {row['id']} [{row['first_skipped_ms']},"
            f" {row['last_skipped_ms']}] {where}",
        )


def check_pauses(findings: Findings, rows: Iterable[dict[str, Any]]) -> None:
    """Report each span `verify_pauses.sql` returned, once per broken condition."""
    for row in rows:
        for problem in _problems(row):
            findings.add(RULE, row["schedule_id"], f"paused span {row['id']} {problem}")


def _problems(row: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if row["previous_open"] or (
        row["previous_resumed_at_ms"] is not None
        and row["paused_at_ms"] < row["previous_resumed_at_ms"]
    ):
        problems.append(f"overlaps span {row['previous_id']} before it")
    records, recorded = int(row["records"] or 0), int(row["recorded"] or 0)
    if records > 1:
        problems.append(f"has {records} paused skip records, at most one is written")
    if row["skipped_count"] is not None and recorded != row["skipped_count"]:
        problems.append(f"says it recorded {row['skipped_count']}, its records hold {recorded}")
    problems.extend(_replay_problems(row))
    if row["automatic"] and (row["replay"] != "skip" or row["end_ms"] != row["until_ms"]):
        problems.append(
            f"was resumed automatically with replay {row['replay']!r} ending at"
            f" {row['end_ms']}, not at its until {row['until_ms']} replaying nothing"
        )
    if row["cause"] == "failures":
        threshold = row["failure_threshold"]
        if (
            row["finished"] != threshold
            or row["failed"] != threshold
            or row["latest_run_id"] != row["last_failed_run_id"]
        ):
            problems.append(
                f"paused after {threshold} failures, but the {row['finished']} finished runs"
                f" up to run {row['last_failed_run_id']} it names hold {row['failed']} failed"
                f" (latest of them run {row['latest_run_id']})"
            )
    return problems


def _replay_problems(row: dict[str, Any]) -> list[str]:
    """Cron Runs inside the span must be what its replay admits."""
    runs = int(row["runs_inside"] or 0)
    if runs == 0:
        return []
    replay = row["replay"]
    inside = f"{runs} cron run(s) in [{row['first_run_ms']}, {row['last_run_ms']}]"
    if replay is None:
        return [f"is open but {inside} were admitted inside it"]
    if replay == "skip":
        return [f"replayed nothing (skip) but {inside} were admitted inside it"]
    if replay == "fire_once":
        last = row["last_ms"]
        if runs > 1 or (last is not None and row["first_run_ms"] <= last):
            return [f"replayed the latest occurrence only (fire_once) but {inside} were admitted"]
    return []
