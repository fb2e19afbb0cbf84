"""The history checker behind `ql3 verify` (issue 6): proves exactly-once from the database alone.

`verify_history` reads a live QL3 database in one READ ONLY REPEATABLE READ transaction (so the
whole verdict is about one snapshot) and reports one `Violation` per finding. Rules:

- `duplicate`: an occurrence (schedule, scheduled_for_ms) admitted more than once. The UNIQUE
  constraint makes this impossible; the checker looks anyway, which is what makes it a check.
- `early`: a run committed before its occurrence (`created_at_ms < scheduled_for_ms`).
- `future`: a run committed later than the database clock at check time: a time written from a
  fast clock that is not the database's (rule zero). Right after a backwards step of the database
  clock this also reports rows from before the step, until the clock passes them again.
- `shape`: not exactly one first attempt, one `run.admitted` and one `attempt.queued` event of
  that attempt per run, all with the run's commit time (D5); attempts/events pointing at no run;
  a run whose schedule is unknown or whose task differs from its schedule's. Later attempts and
  the events workers append are the `attempts` rule's.
- `attempts`: what workers did after admission does not hold together (issue 13, see
  `_verify_attempts`): attempts not numbered 1..n, two live ones, a successor after a success or
  a live attempt, or an attempt whose events do not match its state.
- `time_backwards`: per schedule, commit times in run id order decrease, or the schedule's
  `updated_at_ms` is earlier than its latest run's commit time.
- `order`: per schedule, occurrences in run id order decrease (the cursor never moves backwards).
- `invalid_schedule`: a schedule quarantined by a replica (state `invalid`, with the reason it
  gave), or an active or paused one whose definition cannot be read. It admits nothing, so the
  promise fails for it until an operator fixes it: verify fails (exit 1) while one exists. Its
  history (runs, revisions, skip records) is not judged by the other rules: they need the
  definition it is decided with, which is what cannot be read. Once it is brought back (which
  opens a revision), every rule judges it again, the quarantine's occurrences included.
- `stale_claim`: a claim whose expiry is more than `stale_claim_grace_ms` behind the database
  clock. Claims are only taken on due schedules and any live replica takes an expired one over, so
  an old expired claim means no replica is running (or one is stuck); the default grace of 5 s lets
  an operator check a live system where a claim has just expired.
- `cursor`: an active or paused schedule whose cursor is not an occurrence of its cron, is not
  after its latest run, lies before its live revision's first cursor, or passed `end_at_ms`
  while the schedule is still active.
- `revision`: the schedule revisions (written by the admin with every creation and definition
  change, migrations/0004) do not hold together: none at all (a schedule written past the
  admin), numbers not 1..n, not exactly the last one live, the schedule's definition differs
  from its live revision (changed without one), a revision that keeps the cursor does not start
  where the previous one ended, or a placed first cursor is not exactly the first occurrence
  strictly after max(`placed_after_ms`, `start_at_ms - 1`, the latest decided occurrence).
- `missing`: an occurrence with neither a run nor a skip record. For each revision, every
  occurrence of its definition from its first cursor up to its end cursor (or the next
  revision's first cursor if earlier; the schedule's cursor for the live revision; `end_at_ms`
  once exhausted), at or after `since_ms`, must be exactly one run or lie inside exactly one skip
  record. Runs and skip ranges are walked in order and each gap is counted with
  `count_occurrences_ms`: nothing is enumerated.
- `skip_record`: a skip record that is not what the commit writes: its count differs from the
  occurrences in its range, it does not begin and end on occurrences, a run lies inside it or it
  overlaps another, it records another policy than its revision's, it skips an occurrence that
  was on time at its claim, under fire_once the occurrence after it has no run, under skip the
  occurrence after it was missed too, or it lies outside every revision's range.
- `not_occurrence`: a run whose `scheduled_for_ms` is not an occurrence of its revision's
  definition or lies outside every revision's range (before the first cursor, after `end_at_ms`,
  in an occurrence range a later revision dropped). Runs older than schema 4 (before a
  'migrated' revision 1) are only checked to be occurrences of that revision.

`expected` per schedule is the occurrences of its ranges minus those inside skip records (each
needs a run); `missing` counts the occurrences with neither. Cron math comes from
`ql3_runtime_core` only, never from here.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row
from ql3_runtime_core import EPOCH_MS_MAX, EPOCH_MS_MIN, MISFIRE_GRACE_MS_MAX, InvalidArgumentError

from ._connect import ConnectionOptions, open_connection
from ._errors import DatabaseError
from ._sql import query
from ._verify_accounting import revision_from_row, skip_from_row
from ._verify_attempts import check_attempts
from ._verify_report import ScheduleVerdict, VerifyReport, Violation
from ._verify_rules import (
    Findings,
    Run,
    check_invalid,
    check_schedules,
    check_shape,
    schedule_from_row,
)

__all__ = [
    "RULES",
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "ScheduleVerdict",
    "VerifyReport",
    "Violation",
    "verify_history",
]

STALE_CLAIM_GRACE_MS_DEFAULT = 5_000
RULES = (
    "attempts",
    "cursor",
    "duplicate",
    "early",
    "future",
    "invalid_schedule",
    "missing",
    "not_occurrence",
    "order",
    "revision",
    "shape",
    "skip_record",
    "stale_claim",
    "time_backwards",
)


def verify_history(
    conninfo: str,
    *,
    since_ms: int | None = None,
    stale_claim_grace_ms: int = STALE_CLAIM_GRACE_MS_DEFAULT,
) -> VerifyReport:
    """Check the history of the QL3 database at `conninfo`; read-only, runs as `ql3_admin`.

    Args:
        conninfo: libpq connection string.
        since_ms: only check occurrences at or after this epoch ms (claims and cursors are always
            checked).
        stale_claim_grace_ms: how far past its expiry (database time) a claim may be before it is
            reported; 0 at rest, the default for a live system.

    Raises:
        DatabaseError: the database could not be read.
        InvalidArgumentError: `since_ms` outside `EPOCH_MS_MIN`..`EPOCH_MS_MAX`, or a grace
            outside 0..`MISFIRE_GRACE_MS_MAX` (a `ValueError`; checked before connecting).

    """
    if since_ms is not None and not EPOCH_MS_MIN <= since_ms <= EPOCH_MS_MAX:
        raise InvalidArgumentError(
            "since_ms", since_ms, f"must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX} (epoch ms)"
        )
    # A claim stale for more than a week is stale under any grace: the same bound as misfire.
    if not 0 <= stale_claim_grace_ms <= MISFIRE_GRACE_MS_MAX:
        raise InvalidArgumentError(
            "stale_claim_grace_ms",
            stale_claim_grace_ms,
            f"must be within 0..{MISFIRE_GRACE_MS_MAX} (ms, at most 7 days)",
        )
    params = {"since_ms": since_ms}
    try:
        options = ConnectionOptions(conninfo, application_name="ql3-verify")
        with open_connection(options, autocommit=False) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.cursor(row_factory=dict_row) as cur:
                now_row = cur.execute(query("verify_now")).fetchone()
                schedule_rows = cur.execute(query("verify_schedules")).fetchall()
                run_rows = cur.execute(query("verify_runs"), params).fetchall()
                revision_rows = cur.execute(query("verify_revisions")).fetchall()
                skip_rows = cur.execute(query("verify_skips"), params).fetchall()
                shape_rows = cur.execute(query("verify_shape"), params).fetchall()
                orphan_rows = cur.execute(query("verify_orphans")).fetchall()
                attempt_rows = cur.execute(query("verify_attempts"), params).fetchall()
            conn.rollback()
    except psycopg.Error as exc:
        raise DatabaseError(f"verify_history: cannot read the QL3 history: {exc}") from exc
    if now_row is None:  # pragma: no cover - SELECT without FROM always returns a row
        raise DatabaseError("verify_history: the database returned no clock reading")
    now_ms = int(now_row["now_ms"])
    findings = Findings([])
    skipped = check_invalid(findings, schedule_rows)
    schedules = [schedule_from_row(row) for row in schedule_rows if row["id"] not in skipped]
    runs = [Run(**row) for row in run_rows if row["schedule_id"] not in skipped]
    revisions = [revision_from_row(r) for r in revision_rows if r["schedule_id"] not in skipped]
    skips = [skip_from_row(row) for row in skip_rows if row["schedule_id"] not in skipped]
    check_shape(findings, shape_rows, orphan_rows)
    check_attempts(findings, attempt_rows)
    verdicts = check_schedules(
        findings,
        schedules,
        runs,
        revisions,
        skips,
        now_ms=now_ms,
        since_ms=since_ms,
        grace_ms=stale_claim_grace_ms,
    )
    return VerifyReport(
        ok=not findings.violations,
        violations=tuple(findings.violations),
        schedules=len(schedule_rows),
        runs=len(run_rows),
        checked_at_ms=now_ms,
        since_ms=since_ms,
        stale_claim_grace_ms=stale_claim_grace_ms,
        per_schedule=tuple(verdicts),
    )
