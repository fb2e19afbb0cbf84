"""Backfill: admit, once each, the occurrences of a span that have no Run (DESIGN §7).

The plan is read from the database and computed here: the skip records (any reason) reaching
into the span, each occurrence they cover computed with the revision whose range holds the
record (its cron, zone and the zone rules version it was computed with, loaded from the
database, never this node's tzdata), and with `include_before_creation` the occurrences before
the first revision's first cursor. It is clipped to the schedule's window, to before its cursor
(what lies at or after it is not decided yet) and to the database clock, and the occurrences that
already have a Run are left out. The writes are `ql3.admin_backfill_batch_v1` (migration 0011),
one batch per transaction: a crash between batches leaves a consistent prefix, and the same
request id again admits the rest and nothing twice (the occurrence is the key of runs). Nothing
here reads a clock: every instant is the database's or one the operator wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import InvalidArgumentError, count_occurrences_ms, occurrences_after_ms

from ql3_cluster_postgres._errors import ScheduleNotFoundError, ScheduleStateError

from ._statements import fetch_rows
from ._trigger import fetch_request_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    import psycopg
    from ql3_runtime_core import ZoneRules

__all__ = [
    "BACKFILL_BATCH_DEFAULT",
    "BACKFILL_BATCH_MAX",
    "MAX_BACKFILL_OCCURRENCES",
    "BackfillBatch",
    "BackfillPlan",
    "BackfillReport",
    "plan_backfill",
    "send_batch",
]

# The most occurrences one request may consider (a year of an every-minute schedule is 525 600):
# the plan holds them in memory, and a span larger than this is split by the operator.
MAX_BACKFILL_OCCURRENCES: Final = 1_000_000
BACKFILL_BATCH_DEFAULT: Final = 500
BACKFILL_BATCH_MAX: Final = 10_000
# How many instants one read of existing Runs asks about.
_LOOKUP_CHUNK: Final = 10_000

# SQLSTATEs ql3.admin_backfill_batch_v1 refuses with (migration 0011).
_REFUSED_STATES: Final = ("retired", "invalid")


class BackfillPlan(BaseModel):
    """What a backfill would admit: its occurrences (instant, skip record superseded or None).

    `until_ms` is the last instant considered (`to_ms` clipped, `clipped` says why);
    `already_run` the occurrences of the span that have a Run; `before_creation_left` those
    before the schedule's first cursor left out (no `include_before_creation`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    schedule_name: str
    timezone: str
    from_ms: int
    to_ms: int
    until_ms: int
    clipped: str | None
    include_before_creation: bool
    occurrences: tuple[tuple[int, int | None], ...]
    already_run: int
    before_creation_left: int


class BackfillBatch(BaseModel):
    """One committed batch as the database answered it (counts of this batch and the request)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backfill_id: int
    schedule_id: int
    request_id: str
    requested_by: str
    requested_at_ms: int
    batch_at_ms: int
    admitted: int
    already_run: int
    total_admitted: int
    total_already_run: int
    batches: int
    state: str


class BackfillReport(BaseModel):
    """What a backfill did (or, `dry_run`, would do), for the summary line and `--json`.

    `admitted`: Runs this call wrote; `already_run`: occurrences of the span that had a Run
    (before the plan, or admitted meanwhile by someone else); `before_creation_left`: occurrences
    before the schedule's creation not admitted (no `include_before_creation`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    plan: BackfillPlan
    dry_run: bool
    admitted: int
    already_run: int
    before_creation_left: int
    batches: int
    backfill_id: int | None
    state: str | None


class _Revision(NamedTuple):
    revision: int
    cron: str
    timezone: str
    start_at_ms: int | None
    end_at_ms: int | None
    first_cursor_ms: int | None
    zone_rules_version: str | None


def _piece(
    revision: _Revision, low: int, high: int, rules: ZoneRules
) -> tuple[int, Callable[[], Iterator[int]]]:
    """Count the revision's occurrences in `[low, high]` (its window applied); and a walker."""
    if revision.start_at_ms is not None:
        low = max(low, revision.start_at_ms)
    if revision.end_at_ms is not None:
        high = min(high, revision.end_at_ms)
    if low > high:
        return 0, lambda: iter(())
    count = count_occurrences_ms(revision.cron, revision.timezone, low, high, rules=rules)

    def walk() -> Iterator[int]:
        for at_ms in occurrences_after_ms(revision.cron, revision.timezone, low - 1, rules=rules):
            if at_ms > high:
                return
            yield at_ms

    return count, walk


def _holding(revisions: Sequence[_Revision], at_ms: int) -> _Revision:
    """Return the revision whose range holds `at_ms` (the last whose first cursor is not after)."""
    held = revisions[0]
    for revision in revisions:
        if revision.first_cursor_ms is not None and revision.first_cursor_ms <= at_ms:
            held = revision
    return held


def _schedule_row(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    rows = fetch_rows(conn, "backfill_schedule", {"name": name})
    if not rows:
        raise ScheduleNotFoundError(name)
    row = rows[0]
    if row["state"] in _REFUSED_STATES:
        raise ScheduleStateError(
            name, row["state"], "backfill", "it admits no Run until apply or resume brings it back"
        )
    return row


def _clip(row: dict[str, Any], to_ms: int) -> tuple[int, str | None]:
    """`to_ms` clipped to what is decided: before the cursor, within end_at, at most now."""
    until, why = to_ms, None
    cursor, end_at, now = row["next_due_at_ms"], row["end_at_ms"], row["now_ms"]
    if cursor is not None and until >= cursor:
        until, why = cursor - 1, f"the schedule's cursor {cursor} (not decided yet)"
    if end_at is not None and until > end_at:
        until, why = end_at, f"the schedule's end_at {end_at}"
    if until > now:
        until, why = now, f"the database clock {now}"
    return until, why


def plan_backfill(  # one schedule, one span, read in the caller's transaction
    conn: psycopg.Connection[Any],
    name: str,
    from_ms: int,
    to_ms: int,
    *,
    include_before_creation: bool,
    rules_of: Callable[[str | None], ZoneRules],
) -> BackfillPlan:
    """Compute what a backfill of `name` over `[from_ms, to_ms]` admits; writes nothing.

    `rules_of(version)` returns a zone rules version's stored rules (None: the recorded one).

    Raises:
        InvalidArgumentError: `from_ms` after `to_ms` (names `--from`), or the span holds more
            than `MAX_BACKFILL_OCCURRENCES` occurrences to consider (names `--to`).
        ScheduleNotFoundError: no schedule is named `name`.
        ScheduleStateError: the schedule is retired or quarantined.

    """
    if from_ms > to_ms:
        raise InvalidArgumentError("--from", from_ms, f"must be at or before --to ({to_ms})")
    row = _schedule_row(conn, name)
    schedule_id = int(row["id"])
    until, clipped = _clip(row, to_ms)
    low = from_ms if row["start_at_ms"] is None else max(from_ms, row["start_at_ms"])
    revisions = [
        _Revision(**{field: r[field] for field in _Revision._fields})
        for r in fetch_rows(conn, "backfill_revisions", {"schedule_id": schedule_id})
    ]
    # (skip record superseded or None, counted, walker, admitted if free)
    pieces: list[tuple[int | None, int, Callable[[], Iterator[int]], bool]] = []
    if revisions and low <= until:
        skips = fetch_rows(
            conn, "backfill_skips", {"schedule_id": schedule_id, "from_ms": low, "to_ms": until}
        )
        for skip in skips:
            revision = _holding(revisions, skip["first_skipped_ms"])
            count, walk = _piece(
                revision,
                max(low, skip["first_skipped_ms"]),
                min(until, skip["last_skipped_ms"]),
                rules_of(revision.zone_rules_version),
            )
            pieces.append((int(skip["id"]), count, walk, True))
        first = revisions[0]
        if first.first_cursor_ms is not None:
            high = min(until, first.first_cursor_ms - 1)
            count, walk = _piece(first, low, high, rules_of(first.zone_rules_version))
            pieces.append((None, count, walk, include_before_creation))
    total = sum(count for _, count, _, _ in pieces)
    if total > MAX_BACKFILL_OCCURRENCES:
        raise InvalidArgumentError(
            "--to",
            to_ms,
            f"the span holds {total} occurrences to consider, more than"
            f" MAX_BACKFILL_OCCURRENCES ({MAX_BACKFILL_OCCURRENCES}); split it",
        )
    found: dict[int, int | None] = {}
    left: set[int] = set()
    for skip_id, _, walk, admit in pieces:
        for at_ms in walk():
            if admit:
                found.setdefault(at_ms, skip_id)
            else:
                left.add(at_ms)
    left -= found.keys()
    instants = sorted(found)
    had = _existing(conn, schedule_id, instants)
    return BackfillPlan(
        schedule_id=schedule_id,
        schedule_name=row["name"],
        timezone=row["timezone"],
        from_ms=from_ms,
        to_ms=to_ms,
        until_ms=until,
        clipped=clipped,
        include_before_creation=include_before_creation,
        occurrences=tuple((at, found[at]) for at in instants if at not in had),
        already_run=len(had),
        before_creation_left=len(left - _existing(conn, schedule_id, sorted(left))),
    )


def _existing(conn: psycopg.Connection[Any], schedule_id: int, instants: list[int]) -> set[int]:
    """Return the instants among `instants` that have a Run of the schedule already."""
    had: set[int] = set()
    for start in range(0, len(instants), _LOOKUP_CHUNK):
        chunk = instants[start : start + _LOOKUP_CHUNK]
        rows = fetch_rows(
            conn, "backfill_existing_runs", {"schedule_id": schedule_id, "instants": chunk}
        )
        had.update(int(row["scheduled_for_ms"]) for row in rows)
    return had


def send_batch(  # one batch, in the caller's transaction
    conn: psycopg.Connection[Any],
    plan: BackfillPlan,
    request_id: str,
    batch: Sequence[tuple[int, int | None]],
    *,
    last: bool,
) -> BackfillBatch:
    """Send one batch to `ql3.admin_backfill_batch_v1`; refusals become typed QL3 errors.

    Raises:
        ScheduleNotFoundError: the schedule is gone.
        ScheduleStateError: the schedule was retired or quarantined meanwhile.
        InvalidArgumentError: the request id was used for another schedule, span or flag
            (naming `request_id`), or the database refused an occurrence (naming `occurrence`).

    """
    params = {
        "schedule": plan.schedule_name,
        "request_id": request_id,
        "from_ms": plan.from_ms,
        "to_ms": plan.to_ms,
        "include_before_creation": plan.include_before_creation,
        "occurrences": [at for at, _ in batch],
        "skip_ids": [skip for _, skip in batch],
        "last": last,
    }
    rows = fetch_request_rows(
        conn,
        ("backfill_batch", params),
        (plan.schedule_name, request_id),
        ("backfill", "it was changed meanwhile"),
    )
    row = rows[0]
    return BackfillBatch(**{field: row[field] for field in BackfillBatch.model_fields})
