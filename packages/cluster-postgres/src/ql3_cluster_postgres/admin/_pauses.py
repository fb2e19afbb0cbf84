"""Pause with a reason, resume with a replay choice, and the recorded spans (DESIGN §7, §11).

The writes are SECURITY DEFINER functions of migration 0010 (`ql3.admin_pause_v1`,
`ql3.resume_pause_v1`): the admin role has no INSERT on any history table, and who paused, when
and until when are the database's (session_user, its clock). A duration `until` is added to the
database clock's now inside the function, never to this node's. The resume computes the span's
occurrences here (the schedule's cron, the recorded zone rules, the database time read after the
row was locked, `_pause_span.plan_span`) and the function re-checks them against the locked row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import InvalidArgumentError, ScheduleState, next_occurrence_ms

from ql3_cluster_postgres._errors import ScheduleNotFoundError, ScheduleStateError
from ql3_cluster_postgres._pause_span import Replay, plan_span

from ._session import placement_now
from ._statements import fetch_records, fetch_rows, latest_decided, row_count

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ql3_runtime_core import ZoneRules

    from ._models import ScheduleRecord, ScheduleSpec

__all__ = [
    "PAUSE_REASON_MAX",
    "PauseSpan",
    "apply_pause_settings",
    "close_span",
    "read_pauses",
    "send_pause",
    "send_resume",
    "set_pause_after_failures",
]

# The CHECK schedule_pauses_reason_length of migration 0010.
PAUSE_REASON_MAX = 500


class PauseSpan(BaseModel):
    """One recorded paused span; every time is the database clock's (epoch ms).

    `first_held_ms` is the first occurrence the pause held back (the cursor it kept);
    `cause` is `admin` or `failures` (then `failure_threshold` and `last_failed_run_id` say
    which Runs paused it). The resume fields are None while the span is open; `end_ms` is where
    the span ended (the resume's database time, or `until_ms` for an automatic resume) and
    `skipped_count` how many occurrences its `paused` skip record holds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pause_id: int
    name: str
    schedule_id: int
    paused_at_ms: int
    paused_by: str
    reason: str | None
    until_ms: int | None
    first_held_ms: int | None
    cause: str
    failure_threshold: int | None
    last_failed_run_id: int | None
    resumed_at_ms: int | None
    resumed_by: str | None
    replay: str | None
    automatic: bool | None
    end_ms: int | None
    skipped_count: int | None

    @property
    def open(self) -> bool:
        """Whether the schedule is still paused by this span."""
        return self.resumed_at_ms is None


def read_pauses(conn: psycopg.Connection[Any], names: Sequence[str] | None) -> list[PauseSpan]:
    """Read the spans of `names` (all when None), by name then age."""
    rows = fetch_rows(conn, "read_pauses", {"names": None if names is None else list(names)})
    return [PauseSpan(**{field: row[field] for field in PauseSpan.model_fields}) for row in rows]


def send_pause(
    conn: psycopg.Connection[Any],
    name: str,
    reason: str | None,
    until_ms: int | None,
    until_after_ms: int | None,
) -> int:
    """Pause `name` in the caller's transaction; return the open span's id.

    Raises:
        ScheduleNotFoundError: no schedule is named `name`.
        ScheduleStateError: it is neither active nor paused.
        InvalidArgumentError: `until` not after the database time (or not positive), both an
            instant and a duration, or a reason over `PAUSE_REASON_MAX` characters.

    """
    if reason is not None and len(reason) > PAUSE_REASON_MAX:
        rule = f"must be at most {PAUSE_REASON_MAX} characters"
        raise InvalidArgumentError("reason", reason[:40], rule)
    params = {
        "schedule": name,
        "reason": reason,
        "until_ms": until_ms,
        "until_after_ms": until_after_ms,
    }
    try:
        rows = fetch_rows(conn, "pause_schedule", params)
    except psycopg.errors.NoDataFound as exc:
        raise ScheduleNotFoundError(name) from exc
    except psycopg.errors.ObjectNotInPrerequisiteState as exc:
        state = exc.diag.message_detail or "unknown"
        raise ScheduleStateError(name, state, "pause") from exc
    except psycopg.errors.InvalidParameterValue as exc:
        text = exc.diag.message_primary or str(exc)
        argument, _, rule = text.partition(":")
        value = until_ms if until_ms is not None else until_after_ms
        raise InvalidArgumentError(argument, value, rule.strip()) from exc
    return int(rows[0]["pause_id"])


def send_resume(
    conn: psycopg.Connection[Any],
    record: ScheduleRecord,
    replay: Replay,
    rules: ZoneRules,
) -> None:
    """Resume the paused `record` (its row locked by the caller) with `replay`.

    The span ends at the database time read now, after the lock (DESIGN §7): a Coordinator
    cannot have decided an occurrence of it (a paused row is never claimed, and a claim held
    across the pause was raced by its version bump). Raises `ScheduleStateError` when no span
    was open to close (nothing is written).
    """
    definition = record.definition
    cursor = record.next_due_at_ms
    if definition is None or cursor is None:
        raise ScheduleStateError(
            record.name, record.state.value, "resume", f"{record.definition_error}"
        )
    now = placement_now(conn)
    decided = latest_decided(conn, [record.schedule_id]).get(record.schedule_id)
    # The span holds what nobody decided: a cursor at or before a decided occurrence (a row
    # written past the admin) starts it after that occurrence instead (DESIGN §7).
    start = cursor
    if decided is not None and cursor <= decided:
        start = next_occurrence_ms(definition.cron, definition.timezone, decided, rules=rules)
    plan = plan_span(definition, start, now, replay, rules)
    rows = fetch_rows(
        conn,
        "resume_pause",
        {
            "schedule_id": record.schedule_id,
            "cursor_seen": cursor,
            "end_ms": now,
            "first_ms": plan.first_ms,
            "last_ms": plan.last_ms,
            "count": plan.skipped,
            "next_cursor_ms": plan.next_cursor_ms,
            "state": plan.state,
            "replay": replay.value,
            "automatic": False,
            "zone_rules_version": rules.version,
        },
    )
    if not rows[0]["resumed"]:
        raise ScheduleStateError(
            record.name, record.state.value, "resume", "it has no open paused span to close"
        )


def set_pause_after_failures(
    conn: psycopg.Connection[Any], thresholds: Mapping[int, int | None]
) -> None:
    """Write each schedule's failure threshold (by schedule id; None: never pause)."""
    if thresholds:
        row_count(
            conn,
            "set_pause_after_failures",
            {"schedule_ids": list(thresholds), "thresholds": list(thresholds.values())},
        )


def apply_pause_settings(
    conn: psycopg.Connection[Any],
    specs: Sequence[ScheduleSpec],
    ids: Mapping[str, int],
    now: int,
) -> None:
    """Write the specs' failure thresholds and pause the specs declared paused (apply).

    A declared pause applies to an active schedule only (a paused one keeps its open span, an
    exhausted or retired one has nothing to hold back), and
    an until at or before `now` (the database time the apply read after its locks) declares
    nothing any more, so applying the same file again after the pause ended does not pause anew.
    """
    set_pause_after_failures(conn, {ids[spec.name]: spec.pause_after_failures for spec in specs})
    declared = {
        spec.name: spec.paused
        for spec in specs
        if spec.paused is not None and (spec.paused.until_ms is None or spec.paused.until_ms > now)
    }
    if not declared:
        return
    # Only an active schedule is paused (an exhausted or retired one has nothing to hold back).
    active = {
        record.name
        for record in fetch_records(conn, "read_schedules", {"names": sorted(declared)})
        if record.state is ScheduleState.ACTIVE
    }
    for name, request in sorted(declared.items()):
        if name in active:
            send_pause(conn, name, request.reason, request.until_ms, None)


def close_span(conn: psycopg.Connection[Any], record: ScheduleRecord) -> None:
    """Close the open span of `record` (row locked) before it is retired, if it is paused.

    A retired schedule owes no occurrence after its cursor, so the span records none; closed
    here, it never reads as a span still open when the schedule comes back by `apply`.
    """
    if record.state is not ScheduleState.PAUSED:
        return
    rows = fetch_rows(conn, "share_zone_rules", {})
    version = rows[0]["version"] if rows else None
    now = placement_now(conn)
    fetch_rows(
        conn,
        "resume_pause",
        {
            "schedule_id": record.schedule_id,
            "cursor_seen": record.next_due_at_ms,
            "end_ms": now,
            "first_ms": None,
            "last_ms": None,
            "count": 0,
            "next_cursor_ms": record.next_due_at_ms,
            "state": "active" if record.next_due_at_ms is not None else "exhausted",
            "replay": Replay.SKIP.value,
            "automatic": False,
            "zone_rules_version": version,
        },
    )
