"""The history checker behind `ql3 verify` (DESIGN §14): exactly-once from the database alone.

`verify_history` reads a live QL3 database in one READ ONLY REPEATABLE READ transaction (so the
whole verdict is about one snapshot) and reports one `Violation` per finding (the first
`violations_per_rule` of each rule in detail, every one counted). Rules:

- `duplicate`: an occurrence (schedule, scheduled_for_ms) admitted more than once. The UNIQUE
  constraint makes this impossible; the checker looks anyway, which is what makes it a check.
- `early`: a run committed before its occurrence (`created_at_ms < scheduled_for_ms`).
- `future`: a run committed later than the database clock at check time: a time written from a
  fast clock that is not the database's (rule zero). Right after a backwards step of the database
  clock this also reports rows from before the step, until the clock passes them again.
- `shape`: not exactly one first attempt (number 1), one `run.admitted` event and one
  `attempt.queued` event per attempt, the admission rows all with the run's commit time (DESIGN §5);
  attempts/events pointing at no run; a run whose schedule is unknown or whose task differs from
  its schedule's. Later attempts and the events workers append are the `attempts` rule's.
- `attempts`: what workers did after admission does not hold together (DESIGN §10, see
  `_attempts`): attempts not numbered 1..n, two live ones, a successor after a success or
  a live attempt, or an attempt whose events do not match its state.
- `time_backwards`: per schedule, commit times in run id order decrease, or the schedule's
  `updated_at_ms` is earlier than its latest (highest id) run's commit time.
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
- `stall`, `late`, `misfire_policy` (with `lease_ms` only, see `_timing`): an active
  schedule whose cursor lies more than lease + grace behind the database clock (or `as_of_ms`),
  with the span it left undecided (`_stall`); a run admitted later than its misfire
  policy allows, and a claim whose decision over its missed occurrences breaks its policy
  (`_lateness`). With them, `skip_record` also checks each record against when the
  database wrote it, and the report carries each schedule's lateness distribution.
- `not_occurrence`: a run whose `scheduled_for_ms` is not an occurrence of its revision's
  definition or lies outside every revision's range (before the first cursor, after `end_at_ms`,
  in an occurrence range a later revision dropped). Runs older than schema 4 (before a
  'migrated' revision 1) are only checked to be occurrences of that revision.
- `manual_run`: a manual Run ("trigger now", migration 0008) not as the trigger writes it: not
  admitted at the instant it is for, admitted before its schedule existed or after the database
  clock, or without a `run.admitted` event naming its request (`_manual`). Manual Runs are no
  occurrences: every occurrence rule above (`duplicate`, `early`, `order`, `time_backwards`,
  `missing`, `not_occurrence`, the time rules, lateness) reads cron runs only, and the report
  counts them apart (`manual_runs`); `shape` and `attempts` judge them like any Run.
- `paused`: a recorded paused span (migration 0010) broken: a `paused` skip record outside the
  span it names, a cron Run admitted inside a span that its resume's replay does not admit (skip:
  none; fire_once: only the latest), an automatic resume that did not end at its until or
  replayed something, spans of one schedule overlapping, or a pause after failures not preceded
  by that many consecutive failed Runs (`_paused`). Its records are accounted like any other.
- `overlap`: what the overlap policy decided (`_overlap`, migration 0009): an overlap skip record
  without its cron Run, whose Run executed or did not end skipped; a cron Run ended skipped
  without its record; under a cap (skip, replace, allow with one), more attempts of a schedule
  executing at once (from their database start and end times) than its `max_running`. An
  overlap-skipped occurrence is accounted for once, by its Run, and counted apart
  (`overlap_skipped`).
- `alert`: alerts (migration 0013) recorded once each and only with their condition: the same
  alert twice; a `missed` alert raised before its occurrence's bound (due + the longest claim
  lease + grace) or after a Run or skip record decided it, a `late` one before its deadline or
  for a Run that succeeded by it, a `failed` one for a Run not exhausted, a `paused` one for no
  pause after failures; and, for a schedule that asked for a kind (from when it asked), the
  condition without its alert (`_alerts`).

- `checkpoint`: pruned history (migration 0012) not proven by its checkpoints (`_checkpoints`):
  a schedule's chain not numbered 1..n, a checkpoint whose previous hash is not the prior one's
  hash or that does not begin where the prior one ended, a negative count, counts (cron Runs
  plus skipped occurrences) other than the occurrences of the revision ranges below the
  boundary, Runs or skip records still present below the latest boundary, or occurrences gone
  before the first remaining row with no checkpoint covering them (rows deleted past the prune
  function; reported as `missing` too). A pruned schedule's accounting (`missing`, `skip_record`,
  ...) starts at its latest checkpoint's boundary.

`expected` per schedule is the occurrences of its ranges minus those inside skip records (each
needs a run); `missing` counts the occurrences with neither. Cron math comes from
`ql3_runtime_core` only, never from here, with the zone rules each revision was computed with,
loaded from the database (`_zones`): a skip record of reason `zone_rules_changed` (written
by an adopt) is judged against the old rules and the version history.

How it reads (ten million runs in under two minutes, memory bounded by the number of
schedules, not of runs). The work is split by what each access path does cheaply:

- in SQL, returning only violations: the shape (runs, attempts and events merged in run id order
  through their indexes, `verify_shape.sql`), the run sequence per schedule in id order
  (`verify_run_sequence.sql`: early, future, time_backwards, order), runs and skip records of no
  schedule;
- streamed through server-side cursors, one schedule at a time: its admitted occurrences from the
  (schedule_id, scheduled_for_ms) index alone and its skip records, both in occurrence order,
  into the duplicate count and the accounting walk (`_accounting`). Nothing per run is
  kept; a finding that names a run looks its id up.
"""

from __future__ import annotations

import psycopg
from ql3_runtime_core import (
    EPOCH_MS_MAX,
    EPOCH_MS_MIN,
    LEASE_MS_MAX,
    LEASE_MS_MIN,
    MISFIRE_GRACE_MS_MAX,
    InvalidArgumentError,
)

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection
from ql3_cluster_postgres._errors import DatabaseError

from ._check import Check
from ._reader import SnapshotReader
from ._report import RULE_NAMES, Findings, ScheduleVerdict, VerifyReport, Violation

__all__ = [
    "RULES",
    "STALE_CLAIM_GRACE_MS_DEFAULT",
    "VERIFY_RULES",
    "VIOLATIONS_PER_RULE_DEFAULT",
    "VIOLATIONS_PER_RULE_MAX",
    "ScheduleVerdict",
    "VerifyReport",
    "Violation",
    "verify_history",
]

STALE_CLAIM_GRACE_MS_DEFAULT = 5_000
# Findings listed in detail per rule; the rest are counted. A broken build can break a rule
# once per run: ten million lines help nobody and would hold the memory this bound saves.
VIOLATIONS_PER_RULE_DEFAULT = 100
VIOLATIONS_PER_RULE_MAX = 100_000
RULES = RULE_NAMES
# The same, under the name the package exports: every kind of finding `Violation.rule` may hold.
VERIFY_RULES = RULE_NAMES


def verify_history(
    conninfo: str,
    *,
    since_ms: int | None = None,
    stale_claim_grace_ms: int = STALE_CLAIM_GRACE_MS_DEFAULT,
    violations_per_rule: int = VIOLATIONS_PER_RULE_DEFAULT,
    lease_ms: int | None = None,
    as_of_ms: int | None = None,
) -> VerifyReport:
    """Check the history of the QL3 database at `conninfo`; read-only, runs as `ql3_admin`.

    Args:
        conninfo: libpq connection string.
        since_ms: only check occurrences at or after this epoch ms (claims and cursors are always
            checked).
        stale_claim_grace_ms: how far past its expiry (database time) a claim may be before it is
            reported; 0 at rest, the default for a live system.
        violations_per_rule: how many findings of each rule the report lists in detail (the
            first found); every finding is counted in `VerifyReport.violation_counts`.
        lease_ms: the replicas' claim lease; given, the time rules (`stall`, `late`,
            `misfire_policy`, the writing of skip records) judge against lease + grace, and the
            report holds each schedule's lateness. None: those rules are not applied.
        as_of_ms: the instant the `stall` rule judges at (default: the database clock when the
            check runs), to repeat a report; it may not be after that clock.

    Raises:
        DatabaseError: the database could not be read.
        InvalidArgumentError: `since_ms` outside `EPOCH_MS_MIN`..`EPOCH_MS_MAX`, a grace
            outside 0..`MISFIRE_GRACE_MS_MAX`, `violations_per_rule` outside
            1..`VIOLATIONS_PER_RULE_MAX`, `lease_ms` outside `LEASE_MS_MIN`..`LEASE_MS_MAX`, or
            `as_of_ms` outside the epoch range (a `ValueError`; checked before connecting), or
            `as_of_ms` after the database clock (checked once it is read).

    """
    _check_arguments(since_ms, stale_claim_grace_ms, violations_per_rule)
    _check_time_arguments(lease_ms, as_of_ms)
    findings = Findings(violations_per_rule)
    try:
        options = ConnectionOptions(conninfo, application_name="ql3-verify")
        with open_connection(options, autocommit=False) as conn:
            # One snapshot for every read: rows a live system writes meanwhile cannot make the
            # reads disagree (a run seen by one rule and missing from another).
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            check = Check(SnapshotReader(conn, since_ms), findings, stale_claim_grace_ms)
            check.lease_ms, check.as_of_ms = lease_ms, as_of_ms
            verdicts, counts = check.run()
            conn.rollback()  # nothing to keep: a read-only transaction ends either way
    except psycopg.Error as exc:
        raise DatabaseError(f"verify_history: cannot read the QL3 history: {exc}") from exc
    return VerifyReport(
        ok=not findings.counts,
        violations=tuple(findings.violations),
        violation_counts=dict(sorted(findings.counts.items())),
        violations_per_rule=violations_per_rule,
        schedules=check.schedule_rows,
        runs=counts.cron,
        manual_runs=counts.manual,
        backfilled_runs=counts.backfill,
        overlap_skipped=check.overlap_skipped,
        checked_at_ms=check.now_ms,
        since_ms=since_ms,
        stale_claim_grace_ms=stale_claim_grace_ms,
        per_schedule=tuple(verdicts),
        lease_ms=lease_ms,
        as_of_ms=check.as_of_ms if lease_ms is not None else as_of_ms,
        lateness=check.lateness,
    )


def _check_arguments(since_ms: int | None, grace_ms: int, per_rule: int) -> None:
    if since_ms is not None and not EPOCH_MS_MIN <= since_ms <= EPOCH_MS_MAX:
        raise InvalidArgumentError(
            "since_ms", since_ms, f"must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX} (epoch ms)"
        )
    # A claim stale for more than a week is stale under any grace: the same bound as misfire.
    if not 0 <= grace_ms <= MISFIRE_GRACE_MS_MAX:
        raise InvalidArgumentError(
            "stale_claim_grace_ms",
            grace_ms,
            f"must be within 0..{MISFIRE_GRACE_MS_MAX} (ms, at most 7 days)",
        )
    if not 1 <= per_rule <= VIOLATIONS_PER_RULE_MAX:
        raise InvalidArgumentError(
            "violations_per_rule", per_rule, f"must be within 1..{VIOLATIONS_PER_RULE_MAX}"
        )


def _check_time_arguments(lease_ms: int | None, as_of_ms: int | None) -> None:
    if lease_ms is not None and not LEASE_MS_MIN <= lease_ms <= LEASE_MS_MAX:
        raise InvalidArgumentError(
            "lease_ms", lease_ms, f"must be within {LEASE_MS_MIN}..{LEASE_MS_MAX} (ms)"
        )
    if as_of_ms is not None and not EPOCH_MS_MIN <= as_of_ms <= EPOCH_MS_MAX:
        raise InvalidArgumentError(
            "as_of_ms", as_of_ms, f"must be within {EPOCH_MS_MIN}..{EPOCH_MS_MAX} (epoch ms)"
        )
