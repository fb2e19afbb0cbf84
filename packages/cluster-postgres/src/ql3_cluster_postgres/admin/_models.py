"""What ScheduleAdmin takes and returns: specs, records, apply and status reports (pydantic).

Every time field here was read from the database clock (rule zero); `*_in_ms` fields are
differences against the database's own `now` of the same statement.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from ql3_runtime_core import (
    LEASE_MS_DEFAULT,
    OverlapPolicy,
    ReplicationState,
    ScheduleDefinition,
    ScheduleState,
    TaskExecution,
)

__all__ = [
    "SCHEDULE_NAME_MAX_LENGTH",
    "ApplyReport",
    "ScheduleRecord",
    "ScheduleSpec",
    "ScheduleStatus",
    "StatusReport",
]

from ql3_cluster_postgres._alerts import AlertSettings

_MODEL = ConfigDict(frozen=True, extra="forbid")

# The database CHECK tasks_name_length (migration 0001): 1..200 characters.
SCHEDULE_NAME_MAX_LENGTH: Final = 200


def _check_name(value: str) -> str:
    """Refuse a name a person could not read back from `ql3 schedule list` as they typed it.

    Leading or trailing whitespace is refused rather than trimmed: a silently changed name would
    not match the one the operator pauses or retires later. Non-printable characters (tab,
    newline, BEL, other control and format characters, non-ASCII spaces) are refused because
    they break tables and logs and look like other names.
    """
    if value != value.strip():
        msg = f"name: must not begin or end with whitespace, got {value!r}"
        raise ValueError(msg)
    bad = next((char for char in value if not char.isprintable()), None)
    if bad is not None:
        msg = f"name: must be printable, got {value!r} (holds {bad!r})"
        raise ValueError(msg)
    return value


ScheduleName = Annotated[
    str,
    Field(min_length=1, max_length=SCHEDULE_NAME_MAX_LENGTH),
    AfterValidator(_check_name),
]


class PauseRequest(BaseModel):
    """A pause declared in a schedule file: why, and until which instant (epoch ms, or None).

    An until the database clock has passed declares nothing any more: `apply` does not pause.
    """

    model_config = _MODEL

    reason: str | None = Field(default=None, max_length=500)
    until_ms: int | None = None


class ScheduleSpec(BaseModel):
    """The desired state of one named schedule, as `apply_schedules` reconciles it.

    `execution` is what its runs execute and how (stored on its task; DESIGN §10): by default a
    Python task run by name, with the default attempts, timeout and backoff.
    """

    model_config = _MODEL

    name: ScheduleName
    definition: ScheduleDefinition
    execution: TaskExecution = TaskExecution()
    # After this many consecutive failed Runs the database pauses the schedule (None: never).
    pause_after_failures: int | None = Field(default=None, ge=1, le=1000)
    # Declared paused (`apply`): an active schedule is paused with this reason and until.
    paused: PauseRequest | None = None
    # What it asks to be alerted about and how (None: nothing; migration 0013).
    alerts: AlertSettings | None = None


class ScheduleRecord(BaseModel):
    """One stored schedule with its task name, cursor, claim (if any) and version.

    `definition` is None when this node cannot read the stored one (`definition_error` says
    why; `cron` and `timezone` are the stored text either way). A quarantined schedule (state
    `invalid`) carries the reason a replica gave and the database time it did so.
    """

    model_config = _MODEL

    schedule_id: int
    task_id: int
    name: str
    definition: ScheduleDefinition | None
    cron: str
    timezone: str
    state: ScheduleState
    next_due_at_ms: int | None
    claim_owner_id: str | None
    claim_expires_at_ms: int | None
    version: int
    updated_at_ms: int
    created_at_ms: int
    definition_error: str | None = None
    invalid_reason: str | None = None
    invalidated_at_ms: int | None = None


class ApplyReport(BaseModel):
    """What one `apply_schedules` transaction did, by schedule name (each list sorted)."""

    model_config = _MODEL

    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()


class ScheduleStatus(BaseModel):
    """One schedule seen from the database clock: due in, claim holder, runs, quarantine.

    `overdue` is True for an active schedule whose cursor lies more than the lease plus its
    misfire grace behind the database clock: no replica is deciding it. A quarantined schedule
    (state `invalid`) is never overdue (nothing may decide it); it carries its reason instead.
    `runs_admitted` and `last_admitted_at_ms` are of its cron series; `manual_runs` counts the
    Runs triggered by hand, apart, and `backfilled_runs` those a backfill admitted for
    occurrences first recorded skipped. `start_at_ms` and `end_at_ms` are its window (None:
    unbounded on that side); an `exhausted` schedule has no occurrence left in it. `overlap` and
    `max_running` are its task's overlap policy and cap of live Runs (None: no cap).
    """

    model_config = _MODEL

    schedule_id: int
    name: str
    state: ScheduleState
    next_due_at_ms: int | None
    next_due_in_ms: int | None
    claim_owner_id: str | None
    claim_expires_in_ms: int | None
    version: int
    runs_admitted: int
    last_admitted_at_ms: int | None
    # Manual Runs (`ql3 schedule trigger`): counted apart, never in `runs_admitted`.
    manual_runs: int = 0
    # Backfilled Runs (`ql3 schedule backfill`): counted apart, never in `runs_admitted`.
    backfilled_runs: int = 0
    invalid_reason: str | None = None
    invalidated_at_ms: int | None = None
    overdue: bool = False
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    max_running: int | None = None


class StatusReport(BaseModel):
    """The cluster's schedules at one database instant (`database_now_ms`).

    `invalid_schedules` counts quarantined schedules (state `invalid`): they admit nothing until
    an operator fixes them. `zone_rules_version` is the version every replica must decide with.
    `schedules_overdue` counts the overdue schedules, judged with `lease_ms` (see
    `ScheduleStatus`). `replication` is the node answering and its replication mode
    (DESIGN §13): `unsafe` when standbys stream without a synchronous one.
    """

    model_config = _MODEL

    database_now_ms: int
    schedules: tuple[ScheduleStatus, ...]
    claims_held: int
    next_due_in_ms: int | None
    invalid_schedules: int = 0
    zone_rules_version: str | None = None
    lease_ms: int = LEASE_MS_DEFAULT
    schedules_overdue: int = 0
    replication: ReplicationState | None = None
