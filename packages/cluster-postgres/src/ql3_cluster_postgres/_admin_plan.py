"""What `ScheduleAdmin` writes, decided without the database: validation, cursors, the plan.

Pure functions of the specs, the stored records, the database's `now` and each schedule's latest
decided occurrence (both read by the caller in the same transaction after locking the rows, rule
zero and issue 10.4), so `_admin` stays about transactions and statements.

A cursor placed anew is the first occurrence strictly after max(now, start_at_ms - 1, latest
decided occurrence): never at or before an occurrence a replica already admitted or skipped.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ql3_runtime_core import (
    InvalidCronError,
    ScheduleDefinition,
    ScheduleState,
    load_timezone,
    next_occurrence_ms,
    validate_cron_expression,
)

from ._records import ApplyReport, ScheduleRecord, ScheduleSpec, definition_from_columns

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "REDEFINED",
    "REPLACED",
    "Plan",
    "Update",
    "checked_definition",
    "initial_cursor",
    "reconcile",
    "validated",
]

# Why a change opens a schedule revision (see migrations/0004): the cursor was placed anew, or the
# definition changed around a kept cursor. State changes alone (pause, resume, retire) open none.
REPLACED = "replaced"
REDEFINED = "redefined"


class Update:
    """One schedule row to rewrite (definition, cursor, state), and the revision it opens.

    `revision` is None, REPLACED or REDEFINED; `first_cursor_ms` is that revision's first cursor
    (the new cursor when replaced, the kept one when redefined, even if the row is now exhausted).
    """

    __slots__ = (
        "definition",
        "first_cursor_ms",
        "next_due_at_ms",
        "revision",
        "schedule_id",
        "state",
    )

    def __init__(
        self,
        schedule_id: int,
        definition: ScheduleDefinition,
        next_due_at_ms: int | None,
        state: ScheduleState,
        *,
        revision: str | None = None,
        first_cursor_ms: int | None = None,
    ) -> None:
        self.schedule_id = schedule_id
        self.definition = definition
        self.next_due_at_ms = next_due_at_ms
        self.state = state
        self.revision = revision
        self.first_cursor_ms = first_cursor_ms


class Plan:
    """What `apply_schedules` will write, and the report it returns."""

    __slots__ = ("creates", "report", "updates")

    def __init__(
        self, creates: list[ScheduleSpec], updates: list[Update], report: ApplyReport
    ) -> None:
        self.creates = creates
        self.updates = updates
        self.report = report


def reconcile(
    specs: Sequence[ScheduleSpec],
    stored: Mapping[str, ScheduleRecord],
    now: int,
    decided: Mapping[int, int],
    *,
    prune: bool,
) -> Plan:
    """Plan `apply_schedules`; `decided` maps schedule ids to their latest decided occurrence."""
    creates: list[ScheduleSpec] = []
    updates: list[Update] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for spec in specs:
        record = stored.get(spec.name)
        if record is None:
            creates.append(spec)
        elif record.state is not ScheduleState.RETIRED and record.definition == spec.definition:
            unchanged.append(spec.name)
        else:
            updates.append(_changed(record, spec.definition, now, decided.get(record.schedule_id)))
            updated.append(spec.name)
    wanted = {spec.name for spec in specs}
    retired = sorted(
        name
        for name, record in stored.items()
        if prune and name not in wanted and record.state is not ScheduleState.RETIRED
    )
    for name in retired:
        record = stored[name]
        updates.append(
            Update(
                record.schedule_id, record.definition, record.next_due_at_ms, ScheduleState.RETIRED
            )
        )
    report = ApplyReport(
        created=tuple(sorted(spec.name for spec in creates)),
        updated=tuple(sorted(updated)),
        unchanged=tuple(sorted(unchanged)),
        retired=tuple(retired),
    )
    return Plan(creates, updates, report)


def _changed(
    record: ScheduleRecord, definition: ScheduleDefinition, now: int, decided_ms: int | None
) -> Update:
    """Build the row update for a changed (or retired, now wanted again) schedule."""
    old = record.definition
    timing = (definition.cron, definition.timezone, definition.start_at_ms)
    reborn = record.state in {ScheduleState.RETIRED, ScheduleState.EXHAUSTED}
    if reborn or timing != (old.cron, old.timezone, old.start_at_ms):
        cursor, state = initial_cursor(definition, now, decided_ms)
        revision, first_cursor = REPLACED, cursor
    else:
        cursor = record.next_due_at_ms
        state = ScheduleState.ACTIVE
        revision, first_cursor = REDEFINED, cursor
        if (
            cursor is not None
            and definition.end_at_ms is not None
            and cursor > definition.end_at_ms
        ):
            cursor, state = None, ScheduleState.EXHAUSTED
    if state is ScheduleState.ACTIVE and record.state is ScheduleState.PAUSED:
        state = ScheduleState.PAUSED
    return Update(
        record.schedule_id,
        definition,
        cursor,
        state,
        revision=revision,
        first_cursor_ms=first_cursor,
    )


def initial_cursor(
    definition: ScheduleDefinition, now: int, decided_ms: int | None = None
) -> tuple[int | None, ScheduleState]:
    """First occurrence strictly after max(now, start_at_ms - 1, decided_ms); exhausted past end.

    `decided_ms` is the schedule's latest admitted or skipped occurrence (None for a new one): a
    cursor at or before it would hand a replica an occurrence already decided (issue 10.4).
    """
    after = now if definition.start_at_ms is None else max(now, definition.start_at_ms - 1)
    if decided_ms is not None:
        after = max(after, decided_ms)
    cursor = _next_after(definition.cron, definition.timezone, after)
    if definition.end_at_ms is not None and cursor > definition.end_at_ms:
        return None, ScheduleState.EXHAUSTED
    return cursor, ScheduleState.ACTIVE


@functools.lru_cache(maxsize=4096)
def _next_after(cron: str, timezone: str, after_ms: int) -> int:
    """Memoised `next_occurrence_ms`: a bulk apply asks it for the same (cron, now) many times."""
    return next_occurrence_ms(cron, timezone, after_ms)


def validated(spec: ScheduleSpec) -> ScheduleSpec:
    """Re-validate through runtime-core even if the caller built the model without validation.

    Raises `InvalidCronError` / `UnknownTimezoneError` naming the schedule, before any write.
    """
    d = spec.definition
    try:
        checked = checked_definition(
            (d.cron, d.timezone, d.misfire_policy, d.misfire_grace_ms, d.start_at_ms, d.end_at_ms)
        )
    except InvalidCronError as exc:
        raise InvalidCronError(exc.expression, f"schedule {spec.name!r}: {exc.reason}") from exc
    return ScheduleSpec(name=spec.name, definition=checked)


@functools.lru_cache(maxsize=4096)
def checked_definition(
    fields: tuple[str, str, str, int, int | None, int | None],
) -> ScheduleDefinition:
    """Validate one distinct definition once; cron parsing dominates bulk applies otherwise."""
    validate_cron_expression(fields[0])
    load_timezone(fields[1])
    return definition_from_columns(fields)
