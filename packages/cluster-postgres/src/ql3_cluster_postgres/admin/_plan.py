"""What `ScheduleAdmin` writes, decided without the database: validation, cursors, the plan.

Pure functions of the specs, the stored records, the database's `now` and each schedule's latest
decided occurrence (both read by the caller in the same transaction after locking the rows, rule
zero and DESIGN §7), so `_admin`, `_session` and `_statements` stay about transactions and
statements.

A cursor placed anew is the first occurrence strictly after max(now, start_at_ms - 1, latest
decided occurrence): never at or before an occurrence a replica already admitted or skipped. Every
occurrence is computed with `rules`, the zone rules the database records (loaded by the caller in
the same transaction), never with this node's tzdata.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    InvalidCronError,
    ScheduleDefinition,
    ScheduleState,
    TaskExecution,
    next_occurrence_ms,
    quarantine_reason,
)

from ql3_cluster_postgres._definitions import DefinitionColumns, checked_definition

from ._models import ApplyReport, ScheduleRecord, ScheduleSpec

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ql3_runtime_core import ZoneRules

__all__ = [
    "REDEFINED",
    "REPLACED",
    "Plan",
    "Update",
    "initial_cursor",
    "readable_definition",
    "reconcile",
    "resumed",
    "validated",
]

# States a definition given by `apply` always rewrites, even an equal one: retired rows come
# back, quarantined ones are brought back to active (DESIGN §8).
_ALWAYS_REWRITTEN = frozenset({ScheduleState.RETIRED, ScheduleState.INVALID})

# Why a change opens a schedule revision (see migrations/0004): the cursor was placed anew, or the
# definition changed around a kept cursor. State changes alone (pause, resume, retire) open none,
# except bringing a quarantined schedule back, which always opens one (see `resumed`).
REPLACED = "replaced"
REDEFINED = "redefined"


class Update:
    """One schedule row to rewrite (definition, cursor, state), and the revision it opens.

    A `definition` of None keeps the stored one (a state change of a row whose definition this
    node may not even be able to read).

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
        definition: ScheduleDefinition | None,
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
    """What `apply_schedules` will write, and the report it returns.

    `executions` names the tasks whose execution (command, attempts, timeout, backoff) is
    written: every created one, and every stored one whose execution differs from its spec's.
    """

    __slots__ = ("creates", "executions", "report", "updates")

    def __init__(
        self,
        creates: list[ScheduleSpec],
        updates: list[Update],
        report: ApplyReport,
        executions: list[tuple[str, TaskExecution]],
    ) -> None:
        self.creates = creates
        self.updates = updates
        self.report = report
        self.executions = executions


def reconcile(
    specs: Sequence[ScheduleSpec],
    stored: Mapping[str, ScheduleRecord],
    now: int,
    decided: Mapping[int, int],
    *,
    prune: bool,
    stored_executions: Mapping[str, TaskExecution],
    rules: ZoneRules,
) -> Plan:
    """Plan `apply_schedules`; `decided` maps schedule ids to their latest decided occurrence.

    `stored_executions` maps stored schedule names to their task's execution. A schedule whose
    definition is unchanged but whose execution changed is updated without touching its row:
    its cursor, version and revisions stay (a command is not a timing).
    """
    creates: list[ScheduleSpec] = []
    updates: list[Update] = []
    updated: list[str] = []
    unchanged: list[str] = []
    executions: list[tuple[str, TaskExecution]] = []
    for spec in specs:
        record = stored.get(spec.name)
        execution_changed = stored_executions.get(spec.name) != spec.execution
        if record is None or execution_changed:
            executions.append((spec.name, spec.execution))
        if record is None:
            creates.append(spec)
        elif record.state not in _ALWAYS_REWRITTEN and record.definition == spec.definition:
            # Same timing: the row is not written (no version bump, so a held claim commits).
            (updated if execution_changed else unchanged).append(spec.name)
        else:
            decided_ms = decided.get(record.schedule_id)
            updates.append(_changed(record, spec.definition, now, decided_ms, rules))
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
    return Plan(creates, updates, report, executions)


def _changed(
    record: ScheduleRecord,
    definition: ScheduleDefinition,
    now: int,
    decided_ms: int | None,
    rules: ZoneRules,
) -> Update:
    """Build the row update for a changed (or retired or quarantined, now wanted) schedule.

    A quarantined schedule given a definition with the same timing keeps its cursor, as a
    resumed one does, so the misfire policy decides what the quarantine missed; its live revision
    ends there and a 'redefined' one starts at the same cursor. A quarantined row whose stored
    definition cannot be read (or without a cursor to keep) gets a cursor placed anew, strictly
    after the latest run or skip record ('replaced').
    """
    old = record.definition
    # What places occurrences: a change here makes the stored cursor meaningless. Policy, grace
    # and end only change what is done with the same occurrences, so the cursor can stay.
    timing = (definition.cron, definition.timezone, definition.start_at_ms)
    # A retired or exhausted schedule given a definition again starts afresh from now.
    reborn = record.state in {ScheduleState.RETIRED, ScheduleState.EXHAUSTED}
    if (
        reborn
        or old is None
        or not _keepable(record, definition, decided_ms, rules)
        or timing != (old.cron, old.timezone, old.start_at_ms)
    ):
        cursor, state = initial_cursor(definition, now, decided_ms, rules=rules)
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
        # Changing a paused schedule's definition does not resume it; `resume` does.
        state = ScheduleState.PAUSED
    return Update(
        record.schedule_id,
        definition,
        cursor,
        state,
        revision=revision,
        first_cursor_ms=first_cursor,
    )


def _keepable(
    record: ScheduleRecord,
    definition: ScheduleDefinition,
    decided_ms: int | None,
    rules: ZoneRules,
) -> bool:
    """Whether the stored cursor may be kept: it exists and lies after every decided occurrence.

    Commits keep it so; a quarantined row may have been written past the admin (that is what
    quarantine is for), so its cursor must also be an occurrence of the definition it will be
    decided with. Keeping any other cursor would hand a replica an occurrence already decided
    (DESIGN §7) or one that is no occurrence at all.
    """
    cursor = record.next_due_at_ms
    if cursor is None or (decided_ms is not None and cursor <= decided_ms):
        return False
    return record.state is not ScheduleState.INVALID or _is_occurrence(definition, cursor, rules)


def resumed(
    record: ScheduleRecord,
    definition: ScheduleDefinition,
    now: int,
    decided_ms: int | None,
    rules: ZoneRules,
) -> Update:
    """Build the update that makes a paused or quarantined schedule active again.

    The cursor is kept, so the misfire policy decides what the pause or quarantine missed. A row
    without one, or whose cursor is not after its latest decided occurrence (or, quarantined, is
    not an occurrence of the stored definition) starts from its first occurrence after
    max(now, the latest run or skip record). The stored definition is kept.

    Resuming a paused schedule with its cursor opens no revision (a state change). Bringing a
    quarantined one back always opens one, recording the definition the replicas decide with from
    now on: 'redefined' at the kept cursor (the live revision ends there), or 'replaced' at a
    cursor placed anew.
    """
    kept = record.next_due_at_ms
    placed = not _keepable(record, definition, decided_ms, rules)
    cursor: int | None = kept
    if placed:
        cursor, state = initial_cursor(definition, now, decided_ms, rules=rules)
    elif cursor is not None and definition.end_at_ms is not None and cursor > definition.end_at_ms:
        cursor, state = None, ScheduleState.EXHAUSTED
    else:
        state = ScheduleState.ACTIVE
    if placed:
        return Update(
            record.schedule_id, None, cursor, state, revision=REPLACED, first_cursor_ms=cursor
        )
    if record.state is ScheduleState.INVALID:
        return Update(
            record.schedule_id, None, cursor, state, revision=REDEFINED, first_cursor_ms=kept
        )
    return Update(record.schedule_id, None, cursor, state)


def _is_occurrence(definition: ScheduleDefinition, at_ms: int, rules: ZoneRules) -> bool:
    # An instant is an occurrence exactly when the search from just before it lands on it.
    return _next_after(definition.cron, definition.timezone, at_ms - 1, rules) == at_ms


def readable_definition(
    row: Mapping[str, Any],
) -> tuple[ScheduleDefinition | None, str | None]:
    """Return a row's stored definition and None, or None and why this node cannot read it."""
    try:
        return checked_definition(DefinitionColumns.of(row)), None
    except Exception as exc:  # noqa: BLE001  # any unreadable row must still be listed
        return None, quarantine_reason(exc)


def initial_cursor(
    definition: ScheduleDefinition,
    now: int,
    decided_ms: int | None = None,
    *,
    rules: ZoneRules,
) -> tuple[int | None, ScheduleState]:
    """First occurrence strictly after max(now, start_at_ms - 1, decided_ms); exhausted past end.

    `decided_ms` is the schedule's latest admitted or skipped occurrence (None for a new one): a
    cursor at or before it would hand a replica an occurrence already decided (DESIGN §7).
    `rules` are the recorded zone rules.
    """
    # `start_at_ms - 1`: the search is strictly after, and start_at_ms itself may be the first.
    after = now if definition.start_at_ms is None else max(now, definition.start_at_ms - 1)
    if decided_ms is not None:
        after = max(after, decided_ms)
    cursor = _next_after(definition.cron, definition.timezone, after, rules)
    if definition.end_at_ms is not None and cursor > definition.end_at_ms:
        return None, ScheduleState.EXHAUSTED
    return cursor, ScheduleState.ACTIVE


@functools.lru_cache(maxsize=4096)
def _next_after(cron: str, timezone: str, after_ms: int, rules: ZoneRules) -> int:
    """Memoised `next_occurrence_ms`: a bulk apply asks it for the same (cron, now) many times."""
    return next_occurrence_ms(cron, timezone, after_ms, rules=rules)


def validated(spec: ScheduleSpec) -> ScheduleSpec:
    """Re-validate through runtime-core even if the caller built the model without validation.

    Raises `InvalidCronError` / `UnknownTimezoneError` naming the schedule, before any write.
    """
    d = spec.definition
    try:
        checked = checked_definition(
            DefinitionColumns(
                cron=d.cron,
                timezone=d.timezone,
                misfire_policy=d.misfire_policy.value,
                misfire_grace_ms=d.misfire_grace_ms,
                start_at_ms=d.start_at_ms,
                end_at_ms=d.end_at_ms,
            )
        )
    except InvalidCronError as exc:
        raise InvalidCronError(exc.expression, f"schedule {spec.name!r}: {exc.reason}") from exc
    # Built anew, so every field (the name too) is validated even for an unvalidated spec.
    return ScheduleSpec(
        name=spec.name,
        definition=checked,
        execution=spec.execution,
        pause_after_failures=spec.pause_after_failures,
        paused=spec.paused,
        alerts=spec.alerts,
    )
