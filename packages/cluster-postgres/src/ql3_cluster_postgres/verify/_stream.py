"""One schedule's rows streamed through `verify_history`'s rules, and how findings name a run.

`ScheduleStream` merges one schedule's admitted occurrences (from the (schedule_id,
scheduled_for_ms) index alone) and its skip records in occurrence order, through server-side
cursors, into the duplicate count and the accounting walk: nothing per run is kept. `RunIds`
looks a run's id up only when a finding needs to name it. Split from `_check`, which reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from psycopg.rows import class_row, scalar_row

from ._records import Skip

if TYPE_CHECKING:
    from ._accounting import AccountingWalk
    from ._reader import SnapshotReader
    from ._records import RunCounts, Schedule
    from ._report import Findings

__all__ = ["RunIds", "ScheduleStream"]

_NO_MORE_MS: Final = 2**63  # above every occurrence: no skip record left


def _ignore(at_ms: int, nth: int) -> None:
    """Stand in for the accounting walk of a schedule whose revisions cannot account."""


class RunIds:
    """Names runs for findings: the ids of one occurrence's runs, looked up when first needed."""

    def __init__(self, reader: SnapshotReader, schedule_id: int) -> None:
        self.reader = reader
        self.schedule_id = schedule_id
        self._at_ms: int | None = None
        self._ids: list[int] = []

    def __call__(self, at_ms: int, nth: int) -> int:
        # Only the last occurrence asked is remembered: findings come in occurrence order, and
        # a duplicate names its first and its nth run from the same lookup.
        if at_ms != self._at_ms:
            rows = self.reader.rows(
                "verify_run_ids", schedule_id=self.schedule_id, scheduled_for_ms=at_ms
            )
            self._at_ms, self._ids = at_ms, [int(row["id"]) for row in rows]
        return self._ids[nth]


class ScheduleStream:
    """One schedule's occurrences and skip records, merged in occurrence order, fed to the rules.

    The loop over occurrences is the hot path of a large verify (one pass per run): it counts,
    spots a repeat of the previous occurrence (`duplicate`), and hands the run to the walk.
    """

    def __init__(  # the rows of one schedule and where they go
        self,
        reader: SnapshotReader,
        findings: Findings,
        schedule: Schedule,
        *,
        counts: RunCounts,
        walk: AccountingWalk | None,
        run_id: RunIds,
        backfilled: frozenset[int] = frozenset(),
    ) -> None:
        self.reader = reader
        self.findings = findings
        self.schedule = schedule
        self.counts = counts
        self.walk = walk
        self.run_id = run_id
        # Occurrences filled by a backfilled Run: the skip record (or the request, before the
        # first cursor) accounts for them, the `backfill` rule judges the Run (`_backfill`).
        self.backfilled = backfilled

    def run(self) -> None:
        reader, walk, counts = self.reader, self.walk, self.counts
        schedule_id = self.schedule.id
        skips = reader.stream("verify_schedule_skips", class_row(Skip), schedule_id=schedule_id)
        pending: Skip | None = next(skips, None) if walk is not None else None
        next_skip_ms = pending.first_skipped_ms if pending is not None else _NO_MORE_MS
        walk_run = walk.run if walk is not None else _ignore
        previous, nth, admitted = None, 0, 0
        backfilled, passed = self.backfilled, None
        for batch in reader.batches("verify_occurrences", scalar_row, schedule_id=schedule_id):
            counts.runs += len(batch)
            for at_ms in batch:
                if backfilled and at_ms in backfilled and at_ms != passed:
                    # Its one Run is the backfilled one; any other Run there is judged as usual.
                    passed = at_ms
                    counts.runs -= 1
                    continue
                if at_ms != previous:
                    previous, nth = at_ms, 0
                    admitted += 1
                else:
                    nth += 1
                    self._duplicate(at_ms, nth)
                # A skip record goes before the runs at its first occurrence.
                while at_ms >= next_skip_ms and pending is not None and walk is not None:
                    walk.skip(pending)
                    pending = next(skips, None)
                    next_skip_ms = pending.first_skipped_ms if pending else _NO_MORE_MS
                walk_run(at_ms, nth)
        # Skip records after the last run (or of a schedule without runs) count too.
        while pending is not None and walk is not None:
            walk.skip(pending)
            pending = next(skips, None)
        counts.admitted, counts.latest_ms = admitted, previous

    def _duplicate(self, at_ms: int, nth: int) -> None:
        self.findings.add(
            "duplicate",
            self.schedule.id,
            # A callable: the run ids are looked up only while the rule is under its cap.
            lambda: (
                f"occurrence {at_ms} admitted again by run {self.run_id(at_ms, nth)}"
                f" (first by run {self.run_id(at_ms, 0)})"
            ),
        )
