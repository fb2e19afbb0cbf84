"""What `ScheduleAdmin` writes, decided without the database: validation, cursors, the plan.

Pure functions of the specs, the stored records and the database's `now` (read by the caller in
the same transaction, rule zero), so `_admin` stays about transactions and statements.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    InvalidCronError,
    ScheduleDefinition,
    ScheduleState,
    load_timezone,
    next_occurrence_ms,
    quarantine_reason,
    validate_cron_expression,
)

from ._records import ApplyReport, ScheduleRecord, ScheduleSpec, definition_from_columns

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "Plan",
    "Update",
    "checked_definition",
    "initial_cursor",
    "readable_definition",
    "reconcile",
    "resumed",
    "validated",
]

# States a definition given by `apply` always rewrites, even an equal one: retired rows come
# back, quarantined ones are brought back to active (issue 10.2).
_REPLACED = frozenset({ScheduleState.RETIRED, ScheduleState.INVALID})


class Update:
    """One schedule row to rewrite (definition, cursor, state).

    A `definition` of None keeps the stored one (a state change of a row whose definition this
    node may not even be able to read).
    """

    __slots__ = ("definition", "next_due_at_ms", "schedule_id", "state")

    def __init__(
        self,
        schedule_id: int,
        definition: ScheduleDefinition | None,
        next_due_at_ms: int | None,
        state: ScheduleState,
    ) -> None:
        self.schedule_id = schedule_id
        self.definition = definition
        self.next_due_at_ms = next_due_at_ms
        self.state = state


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
    specs: Sequence[ScheduleSpec], stored: Mapping[str, ScheduleRecord], now: int, *, prune: bool
) -> Plan:
    creates: list[ScheduleSpec] = []
    updates: list[Update] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for spec in specs:
        record = stored.get(spec.name)
        if record is None:
            creates.append(spec)
        elif record.state not in _REPLACED and record.definition == spec.definition:
            unchanged.append(spec.name)
        else:
            updates.append(_changed(record, spec.definition, now))
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
            Update(record.schedule_id, None, record.next_due_at_ms, ScheduleState.RETIRED)
        )
    report = ApplyReport(
        created=tuple(sorted(spec.name for spec in creates)),
        updated=tuple(sorted(updated)),
        unchanged=tuple(sorted(unchanged)),
        retired=tuple(retired),
    )
    return Plan(creates, updates, report)


def _changed(record: ScheduleRecord, definition: ScheduleDefinition, now: int) -> Update:
    """Build the row update for a changed (or retired or quarantined, now wanted) schedule.

    A quarantined schedule given a definition with the same timing keeps its cursor, as a
    resumed one does, so the misfire policy decides what the quarantine missed.
    """
    old = record.definition
    timing = (definition.cron, definition.timezone, definition.start_at_ms)
    reborn = record.state in {ScheduleState.RETIRED, ScheduleState.EXHAUSTED}
    if (
        reborn
        or old is None
        or record.next_due_at_ms is None
        or timing != (old.cron, old.timezone, old.start_at_ms)
    ):
        cursor, state = initial_cursor(definition, now)
    else:
        cursor = record.next_due_at_ms
        state = ScheduleState.ACTIVE
        if (
            cursor is not None
            and definition.end_at_ms is not None
            and cursor > definition.end_at_ms
        ):
            cursor, state = None, ScheduleState.EXHAUSTED
    if state is ScheduleState.ACTIVE and record.state is ScheduleState.PAUSED:
        state = ScheduleState.PAUSED
    return Update(record.schedule_id, definition, cursor, state)


def resumed(record: ScheduleRecord, definition: ScheduleDefinition, now: int) -> Update:
    """Build the update that makes a paused or quarantined schedule active again.

    The cursor is kept, so the misfire policy decides what the pause or quarantine missed; a
    quarantined row without one starts from its next occurrence. The stored definition is kept.
    """
    cursor = record.next_due_at_ms
    if cursor is None:
        cursor, state = initial_cursor(definition, now)
    elif definition.end_at_ms is not None and cursor > definition.end_at_ms:
        cursor, state = None, ScheduleState.EXHAUSTED
    else:
        state = ScheduleState.ACTIVE
    return Update(record.schedule_id, None, cursor, state)


def readable_definition(fields: tuple[Any, ...]) -> tuple[ScheduleDefinition | None, str | None]:
    """Return a stored definition and None, or None and why this node cannot read it."""
    try:
        return checked_definition(fields), None
    except Exception as exc:  # noqa: BLE001  # any unreadable row must still be listed
        return None, quarantine_reason(exc)


def initial_cursor(definition: ScheduleDefinition, now: int) -> tuple[int | None, ScheduleState]:
    """First occurrence strictly after max(now, start_at_ms - 1); exhausted past end_at_ms."""
    after = now if definition.start_at_ms is None else max(now, definition.start_at_ms - 1)
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
