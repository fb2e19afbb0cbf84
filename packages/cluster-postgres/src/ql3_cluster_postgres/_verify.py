"""The history checker behind `ql3 verify` (issue 6): proves exactly-once from the database alone.

`verify_history` reads a live QL3 database in one READ ONLY REPEATABLE READ transaction (so the
whole verdict is about one snapshot) and reports one `Violation` per finding. Rules:

- `duplicate`: an occurrence (schedule, scheduled_for_ms) admitted more than once. The UNIQUE
  constraint makes this impossible; the checker looks anyway, which is what makes it a check.
- `early`: a run committed before its occurrence (`created_at_ms < scheduled_for_ms`).
- `future`: a run committed later than the database clock at check time: a time written from a
  fast clock that is not the database's (rule zero). Right after a backwards step of the database
  clock this also reports rows from before the step, until the clock passes them again.
- `shape`: not exactly one attempt, one `run.admitted` and one `attempt.queued` event per run, all
  with the run's commit time (D5); attempts/events pointing at no run; a run whose schedule is
  unknown or whose task differs from its schedule's. Events of other kinds (appended by workers
  through the ingress) are allowed.
- `time_backwards`: per schedule, commit times in run id order decrease, or the schedule's
  `updated_at_ms` is earlier than its latest run's commit time.
- `order`: per schedule, occurrences in run id order decrease (the cursor never moves backwards).
- `not_occurrence`: a run whose `scheduled_for_ms` is not an occurrence of the cron expression,
  lies before the schedule's first possible occurrence (before `start_at_ms`, or more than 60 s
  before its creation), or after its `end_at_ms`.
- `invalid_schedule`: a schedule quarantined by a replica (state `invalid`, with the reason it
  gave), or an active or paused one whose definition cannot be read. It admits nothing, so the
  promise fails for it until an operator fixes it: verify fails (exit 1) while one exists. Its
  history is not judged by the other rules (they need a definition to judge it by).
- `stale_claim`: a claim whose expiry is more than `stale_claim_grace_ms` behind the database
  clock. Claims are only taken on due schedules and any live replica takes an expired one over, so
  an old expired claim means no replica is running (or one is stuck); the default grace of 5 s lets
  an operator check a live system where a claim has just expired.
- `cursor`: an active or paused schedule whose cursor is not an occurrence of its cron, is not
  after its latest run, lies before its first possible occurrence, or passed `end_at_ms` while the
  schedule is still active.
- `missing`: an occurrence the misfire policy had to admit but that has no run. The occurrences
  checked are those the cursor has passed: from the first occurrence strictly after the schedule's
  creation (and at or after `start_at_ms`, and at or after `since_ms`) up to, not including, the
  cursor (up to `end_at_ms` for exhausted schedules, up to the latest run for retired ones).
  Let t be such an occurrence without a run, and decided at claim time A >= t (unknown):
    * `catch_up`: every occurrence is admitted, so t is missing.
    * any policy: on-time occurrences (A - t <= misfire_grace_ms) are always admitted. A is not
      stored, but the first run r after t was decided in the same claim or a later one, and a
      commit is never earlier than its claim (D5 fails closed), so A <= r.created_at_ms. If
      r.created_at_ms - t <= grace, then t was on time: missing. Nothing is inferred without such
      an r, so this rule never reports a false violation but can miss some.
    * `fire_once`: every decision admits its latest due occurrence (the latest missed one, or a
      later on-time one), so the last occurrence before the cursor must have a run.
  The expected count of a schedule is every occurrence in that range for `catch_up`, and its
  admitted occurrences plus the missing ones for the other policies.

The checks use the schedule's *current* definition: after changing a cron expression, check with
`since_ms` after the change. Cron math comes from `ql3_runtime_core` only, never from here.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from ._errors import DatabaseError
from ._sql import query
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
MAX_OCCURRENCES_DEFAULT = 100_000
RULES = (
    "cursor",
    "duplicate",
    "early",
    "future",
    "invalid_schedule",
    "missing",
    "not_occurrence",
    "order",
    "shape",
    "stale_claim",
    "time_backwards",
)


def verify_history(
    conninfo: str,
    *,
    since_ms: int | None = None,
    stale_claim_grace_ms: int = STALE_CLAIM_GRACE_MS_DEFAULT,
    max_occurrences: int = MAX_OCCURRENCES_DEFAULT,
) -> VerifyReport:
    """Check the history of the QL3 database at `conninfo`; read-only, runs as `ql3_admin`.

    Args:
        conninfo: libpq connection string.
        since_ms: only check occurrences at or after this epoch ms (claims and cursors are always
            checked).
        stale_claim_grace_ms: how far past its expiry (database time) a claim may be before it is
            reported; 0 at rest, the default for a live system.
        max_occurrences: per schedule, stop enumerating cron occurrences after this many (the
            verdict then says `truncated`); narrow the range with `since_ms` instead.

    Raises:
        DatabaseError: the database could not be read.
        ValueError: a negative grace or a non-positive occurrence limit.

    """
    if stale_claim_grace_ms < 0:
        raise ValueError(f"stale_claim_grace_ms must be >= 0, got {stale_claim_grace_ms}")
    if max_occurrences < 1:
        raise ValueError(f"max_occurrences must be >= 1, got {max_occurrences}")
    params = {"since_ms": since_ms}
    try:
        with psycopg.connect(conninfo, autocommit=False) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.cursor(row_factory=dict_row) as cur:
                now_row = cur.execute(query("verify_now")).fetchone()
                schedule_rows = cur.execute(query("verify_schedules")).fetchall()
                run_rows = cur.execute(query("verify_runs"), params).fetchall()
                shape_rows = cur.execute(query("verify_shape"), params).fetchall()
                orphan_rows = cur.execute(query("verify_orphans")).fetchall()
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
    check_shape(findings, shape_rows, orphan_rows)
    verdicts = check_schedules(
        findings,
        schedules,
        runs,
        now_ms=now_ms,
        since_ms=since_ms,
        grace_ms=stale_claim_grace_ms,
        max_occurrences=max_occurrences,
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
