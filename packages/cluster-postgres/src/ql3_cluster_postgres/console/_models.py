"""The rows and pages the web console shows, read by column name (DESIGN §15).

Every instant is epoch milliseconds as the database returned it, and each page carries the
database instant it was read at (`now_ms`): the console formats these and never reads a clock
of its own (rule zero holds for display too, DESIGN §1).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AdmissionRow",
    "AlertsPage",
    "ClaimRow",
    "LatenessPoint",
    "ReplicasPage",
    "RunAttemptRow",
    "RunCountRow",
    "RunningAttemptRow",
    "SchedulePage",
    "ScheduleRow",
    "SchedulesPage",
    "SkipRow",
    "VerifyResult",
    "WorkersPage",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ScheduleRow(BaseModel):
    """One schedule as the schedules page lists it (`console_schedules.sql`).

    The lateness percentiles cover its latest cron Runs of the last hour, at most a bounded
    number of them (`runs_last_hour` says how many), so a page of schedules costs the same
    whatever each schedule's rate.
    """

    model_config = _FROZEN

    now_ms: int
    schedule_id: int
    name: str
    cron: str
    timezone: str
    misfire_policy: str
    overlap: str
    state: str
    invalid_reason: str | None
    pause_reason: str | None
    pause_cause: str | None
    paused_by: str | None
    paused_at_ms: int | None
    paused_until_ms: int | None
    start_at_ms: int | None
    end_at_ms: int | None
    next_due_at_ms: int | None
    claim_owner_id: str | None
    last_run_id: int | None
    last_scheduled_for_ms: int | None
    last_outcome: str | None
    last_exit_code: int | None
    runs_last_hour: int
    lateness_p50_ms: int | None
    lateness_p99_ms: int | None

    @property
    def reason(self) -> str | None:
        """Why the schedule is not simply active: its quarantine reason or its pause's."""
        if self.invalid_reason is not None:
            return self.invalid_reason
        if self.pause_cause is not None:
            why = self.pause_reason or "no reason given"
            return f"{why} ({self.pause_cause}, by {self.paused_by})"
        return None


class SchedulesPage(BaseModel):
    """One page of the schedules page (by name) at one database instant.

    `page` counts from 1; `total` is how many schedules there are, so the page links and the
    heading need no further read.
    """

    model_config = _FROZEN

    now_ms: int
    page: int
    per_page: int
    total: int
    schedules: tuple[ScheduleRow, ...]

    @property
    def pages(self) -> int:
        """How many pages the schedules fill (at least one, the empty page)."""
        return max(1, -(-self.total // self.per_page))


class RunCountRow(BaseModel):
    """How many Runs of one kind ended (or stand) at one outcome."""

    model_config = _FROZEN

    kind: str
    outcome: str
    runs: int


class RunAttemptRow(BaseModel):
    """One attempt of one Run (or the Run alone, attempt fields None, if it has none)."""

    model_config = _FROZEN

    run_id: int
    kind: str
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    attempt_id: int | None
    attempt_number: int | None
    state: str | None
    worker_id: str | None
    started_at_ms: int | None
    finished_at_ms: int | None
    exit_code: int | None
    output_tail: str | None


class SkipRow(BaseModel):
    """One skip record: occurrences accounted for without a Run, and why."""

    model_config = _FROZEN

    skip_id: int
    reason: str
    misfire_policy: str | None
    first_skipped_ms: int
    last_skipped_ms: int
    skipped_count: int
    owner_id: str | None
    created_at_ms: int


class LatenessPoint(BaseModel):
    """One cron Run's admission lateness (database clock), a point of the chart."""

    model_config = _FROZEN

    scheduled_for_ms: int
    lateness_ms: int


class SchedulePage(BaseModel):
    """One schedule: its row, Run counts, latest Runs with attempts, skips and lateness.

    `run_counts` covers the schedule's latest `window_runs` Runs at most (a bounded window, so
    the page's cost does not grow with the history); `run_total` counts all its Runs.
    """

    model_config = _FROZEN

    now_ms: int
    schedule: ScheduleRow
    run_total: int
    window_runs: int
    run_counts: tuple[RunCountRow, ...]
    runs: tuple[RunAttemptRow, ...]
    skips: tuple[SkipRow, ...]
    lateness: tuple[LatenessPoint, ...]


class ClaimRow(BaseModel):
    """A live claim: a schedule a replica holds until its lease expires."""

    model_config = _FROZEN

    now_ms: int
    schedule_id: int
    name: str
    claim_owner_id: str
    claimed_at_ms: int
    claim_expires_at_ms: int


class AdmissionRow(BaseModel):
    """An owner (replica) and its latest admission."""

    model_config = _FROZEN

    owner_id: str
    last_admitted_at_ms: int


class ReplicasPage(BaseModel):
    """Replicas: live claims, each owner's latest admission, the zone rules version."""

    model_config = _FROZEN

    now_ms: int
    claims: tuple[ClaimRow, ...]
    admissions: tuple[AdmissionRow, ...]
    zone_rules_version: str | None
    zone_rules_recorded_at_ms: int | None


class RunningAttemptRow(BaseModel):
    """An attempt running now and the lease its worker holds."""

    model_config = _FROZEN

    attempt_id: int
    run_id: int
    attempt_number: int
    name: str
    schedule_id: int
    scheduled_for_ms: int
    worker_id: str | None
    worker_login: str | None
    started_at_ms: int | None
    lease_expires_at_ms: int | None


class WorkersPage(BaseModel):
    """Workers: the attempts running now."""

    model_config = _FROZEN

    now_ms: int
    running: tuple[RunningAttemptRow, ...]


class AlertsPage(BaseModel):
    """The latest alerts, each as the columns its table has (the page lists them as found)."""

    model_config = _FROZEN

    now_ms: int
    columns: tuple[str, ...]
    alerts: tuple[dict[str, Any], ...]


class VerifyResult(BaseModel):
    """The latest recorded `ql3 verify --record` verdict."""

    model_config = _FROZEN

    id: int
    recorded_at_ms: int
    recorded_by: str
    checked_at_ms: int
    ok: bool
    schedules: int
    runs: int
    violation_total: int
    violation_counts: dict[str, int]
    violations: list[dict[str, Any]]
