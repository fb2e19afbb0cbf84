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

import bisect
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, Any, LiteralString

import psycopg
from psycopg.rows import dict_row
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, next_occurrence_ms

from ._errors import DatabaseError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

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
_CREATION_SLACK_MS = 60_000
RULES = (
    "cursor",
    "duplicate",
    "early",
    "future",
    "missing",
    "not_occurrence",
    "order",
    "shape",
    "stale_claim",
    "time_backwards",
)

_QUERIES = ("verify_now", "verify_orphans", "verify_runs", "verify_schedules", "verify_shape")


def _load_queries() -> dict[str, LiteralString]:
    folder = files("ql3_cluster_postgres") / "sql"
    # The files are part of the wheel, not user input: they are literal SQL (mypy reads
    # LiteralString as str, so no cast is needed for it).
    return {name: (folder / f"{name}.sql").read_text("utf-8") for name in _QUERIES}


class Violation(BaseModel):
    """One finding of the checker: the rule broken, the schedule (if any) and what was seen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    schedule_id: int | None
    detail: str

    def line(self) -> str:
        """Render the finding as the one line `ql3 verify` prints."""
        where = f"schedule {self.schedule_id}" if self.schedule_id is not None else "history"
        return f"{self.rule}: {where}: {self.detail}"


class ScheduleVerdict(BaseModel):
    """Counts for one schedule over the checked range (see the module docstring for `expected`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    name: str
    state: str
    misfire_policy: str
    range_start_ms: int | None
    range_end_ms: int | None
    occurrences: int
    expected: int
    admitted: int
    duplicated: int
    early: int
    missing: int
    truncated: bool


class VerifyReport(BaseModel):
    """The checker's verdict: `ok` is True exactly when there is no violation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    violations: tuple[Violation, ...]
    schedules: int
    runs: int
    checked_at_ms: int
    since_ms: int | None
    stale_claim_grace_ms: int
    per_schedule: tuple[ScheduleVerdict, ...]

    @property
    def expected(self) -> int:
        """Occurrences that had to be admitted, over every schedule."""
        return sum(item.expected for item in self.per_schedule)

    @property
    def admitted(self) -> int:
        """Distinct occurrences admitted, over every schedule."""
        return sum(item.admitted for item in self.per_schedule)

    @property
    def duplicated(self) -> int:
        """Extra runs beyond the first for an occurrence, over every schedule."""
        return sum(item.duplicated for item in self.per_schedule)

    @property
    def early(self) -> int:
        """Runs committed before their occurrence, over every schedule."""
        return sum(item.early for item in self.per_schedule)

    @property
    def missing(self) -> int:
        """Occurrences the policy had to admit that have no run, over every schedule."""
        return sum(item.missing for item in self.per_schedule)

    def count(self, rule: str) -> int:
        """Return how many violations of `rule` were found."""
        return sum(1 for violation in self.violations if violation.rule == rule)

    def lines(self) -> list[str]:
        """Return one printable line per violation."""
        return [violation.line() for violation in self.violations]


@dataclass(frozen=True)
class _Schedule:
    id: int
    task_id: int
    name: str
    definition: ScheduleDefinition
    state: str
    next_due_at_ms: int | None
    claim_owner_id: str | None
    claim_expires_at_ms: int | None
    updated_at_ms: int
    created_at_ms: int


@dataclass(frozen=True)
class _Run:
    id: int
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    created_at_ms: int


@dataclass
class _Findings:
    violations: list[Violation]

    def add(self, rule: str, schedule_id: int | None, detail: str) -> None:
        self.violations.append(Violation(rule=rule, schedule_id=schedule_id, detail=detail))


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
    queries = _load_queries()
    params = {"since_ms": since_ms}
    try:
        with psycopg.connect(conninfo, autocommit=False) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.cursor(row_factory=dict_row) as cur:
                now_row = cur.execute(queries["verify_now"]).fetchone()
                schedule_rows = cur.execute(queries["verify_schedules"]).fetchall()
                run_rows = cur.execute(queries["verify_runs"], params).fetchall()
                shape_rows = cur.execute(queries["verify_shape"], params).fetchall()
                orphan_rows = cur.execute(queries["verify_orphans"]).fetchall()
            conn.rollback()
    except psycopg.Error as exc:
        raise DatabaseError(f"verify_history: cannot read the QL3 history: {exc}") from exc
    if now_row is None:  # pragma: no cover - SELECT without FROM always returns a row
        raise DatabaseError("verify_history: the database returned no clock reading")
    now_ms = int(now_row["now_ms"])
    schedules = [_schedule(row) for row in schedule_rows]
    runs = [_Run(**row) for row in run_rows]
    findings = _Findings([])
    _check_shape(findings, shape_rows, orphan_rows)
    verdicts = _check_schedules(
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
        schedules=len(schedules),
        runs=len(runs),
        checked_at_ms=now_ms,
        since_ms=since_ms,
        stale_claim_grace_ms=stale_claim_grace_ms,
        per_schedule=tuple(verdicts),
    )


def _schedule(row: dict[str, Any]) -> _Schedule:
    definition = ScheduleDefinition(
        cron=row["cron"],
        timezone=row["timezone"],
        misfire_policy=MisfirePolicy(row["misfire_policy"]),
        misfire_grace_ms=row["misfire_grace_ms"],
        start_at_ms=row["start_at_ms"],
        end_at_ms=row["end_at_ms"],
    )
    return _Schedule(
        id=row["id"],
        task_id=row["task_id"],
        name=row["name"],
        definition=definition,
        state=row["state"],
        next_due_at_ms=row["next_due_at_ms"],
        claim_owner_id=row["claim_owner_id"],
        claim_expires_at_ms=row["claim_expires_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        created_at_ms=row["created_at_ms"],
    )


def _check_shape(
    findings: _Findings,
    shape_rows: Sequence[dict[str, Any]],
    orphan_rows: Sequence[dict[str, Any]],
) -> None:
    for row in shape_rows:
        findings.add(
            "shape",
            row["schedule_id"],
            f"run {row['id']} has {row['attempts']} attempt(s) (expected 1),"
            f" {row['run_admitted']} run.admitted and {row['attempt_queued']} attempt.queued"
            f" event(s) (expected 1 each), {row['attempts_off_time']} attempt(s) and"
            f" {row['events_off_time']} admission event(s) not at the run's commit time",
        )
    for row in orphan_rows:
        findings.add(
            "shape", None, f"{row['kind']} {row['id']} points at missing run {row['run_id']}"
        )


def _check_schedules(
    findings: _Findings,
    schedules: Sequence[_Schedule],
    runs: Sequence[_Run],
    *,
    now_ms: int,
    since_ms: int | None,
    grace_ms: int,
    max_occurrences: int,
) -> list[ScheduleVerdict]:
    by_schedule: dict[int, list[_Run]] = {}
    for run in runs:
        by_schedule.setdefault(run.schedule_id, []).append(run)
    known = {schedule.id for schedule in schedules}
    for schedule_id in sorted(set(by_schedule) - known):
        ids = [run.id for run in by_schedule[schedule_id]]
        findings.add("shape", schedule_id, f"runs {ids} belong to no schedule")
    verdicts = []
    for schedule in schedules:
        own = by_schedule.get(schedule.id, [])
        _check_claim(findings, schedule, now_ms=now_ms, grace_ms=grace_ms)
        _check_runs(findings, schedule, own, now_ms=now_ms)
        _check_cursor(findings, schedule, own)
        verdicts.append(
            _check_missing(findings, schedule, own, since_ms=since_ms, limit=max_occurrences),
        )
    return verdicts


def _check_claim(findings: _Findings, schedule: _Schedule, *, now_ms: int, grace_ms: int) -> None:
    expires = schedule.claim_expires_at_ms
    if expires is not None and expires + grace_ms < now_ms:
        findings.add(
            "stale_claim",
            schedule.id,
            f"claim of owner {schedule.claim_owner_id!r} expired at {expires},"
            f" {now_ms - expires} ms before the database clock {now_ms}"
            f" (grace {grace_ms} ms)",
        )


def _check_runs(
    findings: _Findings, schedule: _Schedule, runs: Sequence[_Run], *, now_ms: int
) -> None:
    seen: dict[int, int] = {}
    previous: _Run | None = None
    for run in runs:  # in run id order
        if run.task_id != schedule.task_id:
            findings.add(
                "shape",
                schedule.id,
                f"run {run.id} has task {run.task_id}, its schedule has task {schedule.task_id}",
            )
        if run.scheduled_for_ms in seen:
            findings.add(
                "duplicate",
                schedule.id,
                f"occurrence {run.scheduled_for_ms} admitted again by run {run.id}"
                f" (first by run {seen[run.scheduled_for_ms]})",
            )
        else:
            seen[run.scheduled_for_ms] = run.id
        if run.created_at_ms < run.scheduled_for_ms:
            findings.add(
                "early",
                schedule.id,
                f"run {run.id} committed at {run.created_at_ms},"
                f" {run.scheduled_for_ms - run.created_at_ms} ms before its occurrence"
                f" {run.scheduled_for_ms}",
            )
        if run.created_at_ms > now_ms:
            findings.add(
                "future",
                schedule.id,
                f"run {run.id} committed at {run.created_at_ms},"
                f" {run.created_at_ms - now_ms} ms after the database clock {now_ms}",
            )
        _check_occurrence(findings, schedule, run)
        if previous is not None:
            _check_pair(findings, schedule, previous, run)
        previous = run
    if previous is not None and schedule.updated_at_ms < previous.created_at_ms:
        findings.add(
            "time_backwards",
            schedule.id,
            f"schedule updated_at_ms {schedule.updated_at_ms} is before the commit time"
            f" {previous.created_at_ms} of its latest run {previous.id}",
        )


def _check_pair(findings: _Findings, schedule: _Schedule, before: _Run, after: _Run) -> None:
    if after.created_at_ms < before.created_at_ms:
        findings.add(
            "time_backwards",
            schedule.id,
            f"run {after.id} committed at {after.created_at_ms}, before run {before.id}"
            f" at {before.created_at_ms}",
        )
    if after.scheduled_for_ms < before.scheduled_for_ms:
        findings.add(
            "order",
            schedule.id,
            f"run {after.id} admits occurrence {after.scheduled_for_ms}, before the occurrence"
            f" {before.scheduled_for_ms} of the earlier run {before.id}",
        )


def _is_occurrence(definition: ScheduleDefinition, at_ms: int) -> bool:
    return next_occurrence_ms(definition.cron, definition.timezone, at_ms - 1) == at_ms


def _first_possible(schedule: _Schedule, *, strictly_after_creation: bool) -> int:
    """Return the schedule's first occurrence: after creation and at or after `start_at_ms`.

    Strictly after creation bounds the `missing` range. The sanity bound (not strict) allows
    `_CREATION_SLACK_MS` before `created_at_ms`: the admin computes the first cursor from a clock
    read a moment before the row's creation time is sampled, so an occurrence in between is a
    legitimate first cursor.
    """
    definition = schedule.definition
    if strictly_after_creation:
        after = schedule.created_at_ms
    else:
        after = schedule.created_at_ms - _CREATION_SLACK_MS - 1
    if definition.start_at_ms is not None:
        after = max(after, definition.start_at_ms - 1)
    return next_occurrence_ms(definition.cron, definition.timezone, after)


def _check_occurrence(findings: _Findings, schedule: _Schedule, run: _Run) -> None:
    definition = schedule.definition
    at = run.scheduled_for_ms
    if not _is_occurrence(definition, at):
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, which is not an occurrence of {definition.cron!r}"
            f" in {definition.timezone}",
        )
    elif at < _first_possible(schedule, strictly_after_creation=False):
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, before the schedule's first possible occurrence"
            f" (created at {schedule.created_at_ms}, start_at_ms {definition.start_at_ms},"
            f" slack {_CREATION_SLACK_MS} ms)",
        )
    if definition.end_at_ms is not None and at > definition.end_at_ms:
        findings.add(
            "not_occurrence",
            schedule.id,
            f"run {run.id} admits {at}, after end_at_ms {definition.end_at_ms}",
        )


def _check_cursor(findings: _Findings, schedule: _Schedule, runs: Sequence[_Run]) -> None:
    cursor = schedule.next_due_at_ms
    if schedule.state not in ("active", "paused") or cursor is None:
        return
    definition = schedule.definition
    latest = max((run.scheduled_for_ms for run in runs), default=None)
    problems = []
    if latest is not None and cursor <= latest:
        problems.append(f"is not after the latest admitted occurrence {latest}")
    if not _is_occurrence(definition, cursor):
        problems.append(f"is not an occurrence of {definition.cron!r} in {definition.timezone}")
    if cursor < _first_possible(schedule, strictly_after_creation=False):
        problems.append(
            f"is before the first possible occurrence (created at {schedule.created_at_ms})"
        )
    if (
        schedule.state == "active"
        and definition.end_at_ms is not None
        and cursor > definition.end_at_ms
    ):
        problems.append(f"passed end_at_ms {definition.end_at_ms} but the schedule is still active")
    for problem in problems:
        findings.add("cursor", schedule.id, f"cursor {cursor} {problem}")


def _range_end(schedule: _Schedule, runs: Sequence[_Run]) -> int | None:
    """Return the exclusive end of the decided occurrences (see the module docstring)."""
    if schedule.state in ("active", "paused") and schedule.next_due_at_ms is not None:
        return schedule.next_due_at_ms
    if schedule.state == "exhausted" and schedule.definition.end_at_ms is not None:
        return schedule.definition.end_at_ms + 1
    latest = max((run.scheduled_for_ms for run in runs), default=None)
    return None if latest is None else latest + 1


def _occurrences(definition: ScheduleDefinition, start: int, end: int, limit: int) -> Iterator[int]:
    at = start
    produced = 0
    while at < end and produced < limit:
        yield at
        produced += 1
        at = next_occurrence_ms(definition.cron, definition.timezone, at)


def _check_missing(
    findings: _Findings,
    schedule: _Schedule,
    runs: Sequence[_Run],
    *,
    since_ms: int | None,
    limit: int,
) -> ScheduleVerdict:
    definition = schedule.definition
    start = _first_possible(schedule, strictly_after_creation=True)
    if since_ms is not None and since_ms > start:
        start = next_occurrence_ms(definition.cron, definition.timezone, since_ms - 1)
    end = _range_end(schedule, runs)
    occurrences = list(_occurrences(definition, start, end, limit + 1)) if end is not None else []
    truncated = len(occurrences) > limit
    occurrences = occurrences[:limit]
    admitted_at = sorted({run.scheduled_for_ms for run in runs})
    # The earliest commit among the runs of each occurrence: the bound on the deciding claim.
    first_commit: dict[int, int] = {}
    for run in runs:
        known = first_commit.get(run.scheduled_for_ms)
        first_commit[run.scheduled_for_ms] = (
            run.created_at_ms if known is None else min(known, run.created_at_ms)
        )
    missing = [
        at
        for at in occurrences
        if at not in first_commit and _must_admit(schedule, at, admitted_at, first_commit)
    ]
    policy = definition.misfire_policy
    if (
        policy is MisfirePolicy.FIRE_ONCE
        and occurrences
        and not truncated
        and occurrences[-1] not in first_commit
        and occurrences[-1] not in missing
    ):
        missing.append(occurrences[-1])
    for at in missing:
        findings.add(
            "missing",
            schedule.id,
            f"occurrence {at} has no run, but the {policy.value} policy had to admit it"
            f" (grace {definition.misfire_grace_ms} ms)",
        )
    in_range = [at for at in admitted_at if occurrences and occurrences[0] <= at <= occurrences[-1]]
    admitted_total = len(admitted_at)
    expected = (
        len(occurrences) + (admitted_total - len(in_range))
        if policy is MisfirePolicy.CATCH_UP
        else admitted_total + len(missing)
    )
    return ScheduleVerdict(
        schedule_id=schedule.id,
        name=schedule.name,
        state=schedule.state,
        misfire_policy=policy.value,
        range_start_ms=start if end is not None else None,
        range_end_ms=end,
        occurrences=len(occurrences),
        expected=expected,
        admitted=admitted_total,
        duplicated=len(runs) - admitted_total,
        early=sum(1 for run in runs if run.created_at_ms < run.scheduled_for_ms),
        missing=len(missing),
        truncated=truncated,
    )


def _must_admit(
    schedule: _Schedule,
    at: int,
    admitted_at: Sequence[int],
    first_commit: dict[int, int],
) -> bool:
    definition = schedule.definition
    if definition.misfire_policy is MisfirePolicy.CATCH_UP:
        return True
    index = bisect.bisect_right(admitted_at, at)
    if index == len(admitted_at):
        return False
    return first_commit[admitted_at[index]] - at <= definition.misfire_grace_ms
