"""Rule `checkpoint` of `verify_history` (DESIGN §7): pruned history is still proven.

A prune (migration 0012) removes a schedule's history below an occurrence boundary and leaves a
chain of checkpoints in its place. Verify accounts occurrence by occurrence only from the latest
boundary on (`covered_below`) and proves everything before it from the chain:

- the chain holds: numbered 1..n, each one's `previous_hash` is the prior one's `hash`, each
  begins where the prior one ended, its counts are non-negative;
- its counts are the occurrences: cron Runs plus skipped occurrences (every reason but `overlap`,
  whose occurrence is its cron Run's) removed below the boundary equal the occurrences of the
  schedule's revision ranges below it (at least that many when revision 1 is `migrated`: Runs
  from before accounting existed count too);
- nothing is left below the latest boundary (a Run or skip record a prune would have removed);
- and, judged by the accounting walk, occurrences missing before the first remaining row with no
  checkpoint covering them (rows deleted past the prune function).

The hashes cannot be recomputed (the rows are gone); the chain is what ties each checkpoint to
the one before it, so one rewritten or dropped is seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import count_occurrences_ms

from ._revisions import MIGRATED, revision_windows

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._records import Revision, Schedule
    from ._report import Findings

__all__ = ["Covered", "check_checkpoint_counts", "check_checkpoints"]


@dataclass
class Covered:
    """What one schedule's checkpoints cover, summed over its chain."""

    below_ms: int
    cron_runs: int = 0
    skipped: int = 0
    checkpoints: int = 0


def _counts(value: dict[str, Any] | None) -> dict[str, int]:
    return {str(key): int(count) for key, count in dict(value or {}).items()}


def check_checkpoints(findings: Findings, rows: Iterable[dict[str, Any]]) -> dict[int, Covered]:
    """Judge every checkpoint's place in its chain; return each schedule's covered history."""
    covered: dict[int, Covered] = {}
    for row in rows:
        schedule_id, seq = int(row["schedule_id"]), int(row["seq"])
        name = f"checkpoint {seq} (id {row['id']})"
        expected_seq = 1 if row["prior_seq"] is None else int(row["prior_seq"]) + 1
        if seq != expected_seq:
            findings.add(
                "checkpoint", schedule_id, f"{name} follows {expected_seq - 1}: a gap in the chain"
            )
        prior_hash = None if row["prior_hash"] is None else bytes(row["prior_hash"])
        previous = None if row["previous_hash"] is None else bytes(row["previous_hash"])
        if previous != prior_hash:
            findings.add(
                "checkpoint",
                schedule_id,
                f"{name} names previous hash {_hex(previous)}, the prior checkpoint's hash is"
                f" {_hex(prior_hash)}: the chain is broken",
            )
        if row["covered_from_ms"] != row["prior_below_ms"]:
            findings.add(
                "checkpoint",
                schedule_id,
                f"{name} covers from {row['covered_from_ms']}, the prior one ended at"
                f" {row['prior_below_ms']}: a gap between checkpoints",
            )
        runs, skip_records = _counts(row["runs_by_kind"]), _counts(row["skip_records_by_reason"])
        skipped, attempts = _counts(row["skipped_by_reason"]), _counts(row["attempts_by_state"])
        counts = [*runs.values(), *skip_records.values(), *skipped.values(), *attempts.values()]
        counts += [int(row["events"]), int(row["pauses"]), int(row["backfills"])]
        if any(count < 0 for count in counts):
            findings.add("checkpoint", schedule_id, f"{name} holds a negative count")
        total = covered.setdefault(schedule_id, Covered(below_ms=int(row["covered_below_ms"])))
        total.below_ms = int(row["covered_below_ms"])
        total.checkpoints += 1
        total.cron_runs += runs.get("cron", 0)
        total.skipped += sum(count for reason, count in skipped.items() if reason != "overlap")
        if row["latest"] and (row["runs_left"] or row["skips_left"]):
            findings.add(
                "checkpoint",
                schedule_id,
                f"{row['runs_left']} Run(s) and {row['skips_left']} skip record(s) older than"
                f" {name}'s boundary {total.below_ms} are still present",
            )
    return covered


def check_checkpoint_counts(
    findings: Findings, schedule: Schedule, revisions: Sequence[Revision], covered: Covered
) -> None:
    """Check that the chain's counts are the occurrences of the revision ranges it covers."""
    expected = 0
    for window in revision_windows(schedule, revisions):
        high = min(window.high, covered.below_ms)
        if window.low < high:
            definition = window.definition
            expected += count_occurrences_ms(
                definition.cron, definition.timezone, window.low, high - 1, rules=window.rules
            )
    accounted = covered.cron_runs + covered.skipped
    legacy = bool(revisions) and revisions[0].reason == MIGRATED
    if accounted < expected or (accounted != expected and not legacy):
        findings.add(
            "checkpoint",
            schedule.id,
            f"{covered.checkpoints} checkpoint(s) below {covered.below_ms} account for"
            f" {accounted} occurrence(s) ({covered.cron_runs} cron Run(s), {covered.skipped}"
            f" skipped), the revisions have {expected} there",
        )


def _hex(value: bytes | None) -> str:
    return "none" if value is None else value.hex()[:16]
