"""One verify, in order: each read of the snapshot handed to the rules that judge it.

`verify_history` (in `_verify`) opens the snapshot and builds the report; this module decides
the order of the reads (the clock first, quarantined schedules before the rules that skip them)
and which rule sees which rows.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from psycopg.rows import dict_row
from ql3_runtime_core import InvalidArgumentError

from ql3_cluster_postgres._errors import DatabaseError

from ._accounting import Accounting, AccountingWalk, revision_from_row
from ._alerts import check_alerts, check_missed_occurrences
from ._attempts import check_attempt_timing, check_attempts
from ._backfill import check_backfill_runs
from ._checkpoints import Covered, check_checkpoint_counts, check_checkpoints
from ._manual import check_manual_runs
from ._overlap import check_overlap
from ._paused import check_paused_skips, check_pauses
from ._records import RunCounts
from ._revisions import check_revisions
from ._rules import (
    check_claim,
    check_invalid,
    check_schedule_row,
    check_sequence,
    report_orphan,
    report_shape,
    report_stray_run,
    schedule_from_row,
    schedule_verdict,
)
from ._stream import RunIds, ScheduleStream
from ._timing import check_timing
from ._zones import VerifyZones

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ._reader import SnapshotReader
    from ._records import Revision, Schedule
    from ._report import Findings, ScheduleLateness, ScheduleVerdict

__all__ = ["Check"]

# Runs per `verify_attempts.sql` call: their attempts come back whole, so a batch stays small.
_SUSPECT_BATCH: Final = 5_000


class RunKinds(NamedTuple):
    """The Runs in scope by kind: only cron Runs are occurrences decided on time."""

    cron: int
    manual: int
    backfill: int


class Check:
    """One verify: the reads in order, each handing its rows to the rules."""

    def __init__(self, reader: SnapshotReader, findings: Findings, grace_ms: int) -> None:
        self.reader = reader
        self.findings = findings
        self.grace_ms = grace_ms
        self.now_ms = 0
        self.schedule_rows = 0
        self.zones: VerifyZones | None = None
        self.lease_ms: int | None = None
        self.as_of_ms: int | None = None
        self.lateness: tuple[ScheduleLateness, ...] = ()
        # Each schedule's backfilled occurrences: judged by `backfill`, not by the walk.
        self.backfilled: dict[int, frozenset[int]] = {}
        self.overlap_skipped = 0
        # Each pruned schedule's checkpoint chain: its accounting starts at the latest boundary.
        self.covered: dict[int, Covered] = {}
        # Runs whose attempts need judging one by one (`_shape`), as 8-byte integers: a history
        # where every run was retried must not cost a Python object per run.
        self.suspect_runs = array("q")

    def run(self) -> tuple[list[ScheduleVerdict], RunKinds]:
        """Check everything; return each schedule's verdict and the Runs in scope by kind."""
        reader, findings = self.reader, self.findings
        # Before any cursor is declared: the setting applies to cursors planned after it.
        reader.execute("verify_plan_whole_results")
        # The snapshot's one clock reading: every "now" of every rule is this one.
        now = reader.rows("verify_now")[0]
        self.now_ms = int(now["now_ms"])
        if self.as_of_ms is not None and self.as_of_ms > self.now_ms:
            # Judging an instant still to come would report stalls that have not happened.
            raise InvalidArgumentError(
                "as_of_ms", self.as_of_ms, f"is after the database clock ({self.now_ms})"
            )
        if self.as_of_ms is None:
            self.as_of_ms = self.now_ms
        # Refuses (one line) when the recorded rules' data is not stored: nothing to judge with.
        self.zones = VerifyZones(lambda: reader.conn, now["zone_rules_version"])
        schedule_rows = reader.rows("verify_schedules")
        self.schedule_rows = len(schedule_rows)
        # Quarantined schedules are reported once here and judged by no other rule.
        skipped = check_invalid(findings, schedule_rows)
        schedules = [schedule_from_row(row) for row in schedule_rows if row["id"] not in skipped]
        revisions = self._revisions(schedules, skipped)
        self._strays({row["id"] for row in schedule_rows}, skipped)
        self.covered = check_checkpoints(findings, reader.rows("verify_checkpoints"))
        self._shape()
        check_manual_runs(
            findings,
            reader.stream("verify_manual_runs", dict_row, now_ms=self.now_ms),
            now_ms=self.now_ms,
        )
        check_pauses(findings, reader.rows("verify_pauses", now_ms=self.now_ms))
        check_paused_skips(findings, reader.rows("verify_paused_skips"))
        self.backfilled = check_backfill_runs(
            findings,
            reader.stream("verify_backfill_runs", dict_row),
            revisions,
            {schedule.id for schedule in schedules},
        )
        check_attempts(findings, self._suspect_attempts())
        check_attempt_timing(findings, reader.stream("verify_attempt_timing", dict_row))
        check_overlap(findings, reader.stream("verify_overlap", dict_row, now_ms=self.now_ms))
        self.overlap_skipped = int(reader.rows("verify_overlap_skips")[0]["skips"])
        check_alerts(findings, reader.stream("verify_alerts_recorded", dict_row))
        check_alerts(findings, reader.stream("verify_alerts_missing", dict_row))
        check_missed_occurrences(
            findings, reader.stream("verify_alerts_missed", dict_row), revisions
        )
        if self.lease_ms is not None:
            self.lateness = check_timing(
                reader,
                findings,
                schedules,
                revisions,
                as_of_ms=self.as_of_ms,
                lease_ms=self.lease_ms,
            )
        counts = self._sequence({schedule.id for schedule in schedules})
        verdicts = [
            self._schedule(schedule, revisions.get(schedule.id, []), counts.get(schedule.id))
            for schedule in schedules
        ]
        count = reader.rows("verify_run_count")[0]
        return verdicts, RunKinds(
            int(count["runs"]), int(count["manual_runs"]), int(count["backfilled_runs"])
        )

    def _revisions(
        self, schedules: Sequence[Schedule], skipped: set[int]
    ) -> dict[int, list[Revision]]:
        """Read every revision, grouped by schedule (a handful each); report those of none."""
        grouped: dict[int, list[Revision]] = {}
        zones = self._zones()
        for row in self.reader.rows("verify_revisions"):
            if row["schedule_id"] not in skipped:
                grouped.setdefault(row["schedule_id"], []).append(revision_from_row(row, zones))
        known = {schedule.id for schedule in schedules}
        for schedule_id in sorted(set(grouped) - known):
            self.findings.add("revision", schedule_id, "revisions belong to no schedule")
        return grouped

    def _zones(self) -> VerifyZones:
        if self.zones is None:  # pragma: no cover - set first thing in run()
            msg = "verify_history: zone rules read before the clock"
            raise DatabaseError(msg)
        return self.zones

    def _strays(self, stored: set[int], skipped: set[int]) -> None:
        """Report runs and skip records of no schedule, and runs of another task."""
        findings = self.findings
        unknown: dict[int, list[int]] = {}  # schedule id -> [runs, first id, last id]
        for row in self.reader.stream("verify_stray_runs", dict_row):
            schedule_id = row["schedule_id"]
            if schedule_id not in stored:
                seen = unknown.setdefault(schedule_id, [0, row["id"], row["id"]])
                seen[0] += 1
                seen[2] = row["id"]
            elif schedule_id not in skipped:
                report_stray_run(findings, row)
        for schedule_id, (runs, first, last) in unknown.items():
            findings.add(
                "shape",
                schedule_id,
                f"{runs} run(s) belong to no schedule (ids {first} to {last})",
            )
        for row in self.reader.rows("verify_stray_skips"):
            findings.add(
                "skip_record",
                row["schedule_id"],
                f"{row['skip_records']} skip record(s) belong to no schedule (ids"
                f" {row['first_id']} to {row['last_id']})",
            )

    def _shape(self) -> None:
        """Report runs of the wrong shape and each attempt and event of no run.

        Keep the runs whose attempts `verify_attempts.sql` must judge one by one.
        """
        for row in self.reader.stream("verify_shape", dict_row):
            if row["attempts_suspect"]:
                self.suspect_runs.append(row["id"])
            if not row["shape_broken"]:
                continue
            # A run row exists but its attempts or events are wrong; otherwise the id is only
            # named by attempts or events, whose every row is then reported as an orphan.
            if row["runs"] == 1:
                report_shape(self.findings, row)
                continue
            for orphan in self.reader.rows("verify_orphans", run_id=row["id"]):
                report_orphan(self.findings, orphan)

    def _suspect_attempts(self) -> Iterator[dict[str, Any]]:
        """Yield the attempts of the runs `verify_shape.sql` marked, a batch of runs at a time.

        Single-attempt runs it found healthy (nearly every run of a healthy history) are judged
        there and never read again.
        """
        runs = self.suspect_runs
        for low in range(0, len(runs), _SUSPECT_BATCH):
            batch = runs[low : low + _SUSPECT_BATCH].tolist()
            yield from self.reader.rows("verify_attempts", run_ids=batch)

    def _sequence(self, checked: set[int]) -> dict[int, RunCounts]:
        """Judge the runs per schedule in id order; keep each schedule's newest and early count."""
        counts: dict[int, RunCounts] = {}
        rows = self.reader.stream("verify_run_sequence", dict_row, now_ms=self.now_ms)
        for row in rows:
            if row["schedule_id"] not in checked:
                continue
            count = counts.setdefault(row["schedule_id"], RunCounts())
            if check_sequence(self.findings, row, now_ms=self.now_ms):
                count.early += 1
            if row["newest"]:
                count.newest_id, count.newest_created_ms = row["id"], row["created_at_ms"]
        return counts

    def _schedule(
        self, schedule: Schedule, revisions: Sequence[Revision], counts: RunCounts | None
    ) -> ScheduleVerdict:
        """Check one schedule: its claim, revisions, and its runs and skip records in order."""
        findings = self.findings
        counts = counts or RunCounts()
        check_claim(findings, schedule, now_ms=self.now_ms, grace_ms=self.grace_ms)
        run_id = RunIds(self.reader, schedule.id)
        walk = None
        zones = self._zones()
        covered = self.covered.get(schedule.id)
        since_ms, boundary = self.reader.since_ms, None
        if covered is not None:
            since_ms = covered.below_ms if since_ms is None else max(since_ms, covered.below_ms)
            # A caller's since_ms past the boundary cuts the history there: no gap is unproven.
            boundary = covered.below_ms if since_ms == covered.below_ms else None
        if check_revisions(findings, schedule, revisions):
            if covered is not None:
                check_checkpoint_counts(findings, schedule, revisions, covered)
            walk = AccountingWalk(
                findings,
                schedule,
                revisions,
                since_ms=since_ms,
                run_id=run_id,
                switches=zones.switches,
                history_from_ms=boundary,
            )
        ScheduleStream(
            self.reader,
            findings,
            schedule,
            counts=counts,
            walk=walk,
            run_id=run_id,
            backfilled=self.backfilled.get(schedule.id, frozenset()),
        ).run()
        # The cursor was placed with the live revision's rules.
        live = revisions[-1].rules if revisions else None
        check_schedule_row(findings, schedule, counts, live or zones.recorded_rules())
        accounting = walk.finish() if walk is not None else Accounting()
        return schedule_verdict(schedule, counts, accounting)
