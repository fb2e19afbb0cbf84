"""Alerts (migration 0013): what a schedule asks to be told, and the alerts the database recorded.

An alert is a fact written by the database, once per schedule, kind and subject (its UNIQUE key),
at the database's time: `missed` (an occurrence with neither a Run nor a skip record by its due
time + the longest claim lease + the schedule's grace), `late` (a Run not succeeded by its
scheduled time + the schedule's deadline), `failed` (a Run's attempts exhausted) and `paused` (the
schedule paused itself after failures). The models here are shared by the admin (settings), the
worker ingress (taking and finishing deliveries) and the history reader (`ql3 alerts list`,
metrics); the rows are read by column name into them.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ALERT_DEADLINE_MS_MAX",
    "ALERT_DEADLINE_MS_MIN",
    "ALERT_DELIVERY_ATTEMPTS_MAX",
    "ALERT_KINDS",
    "ALERT_MISSED_MARGIN_MS",
    "AlertCounts",
    "AlertKind",
    "AlertRecord",
    "AlertSettings",
    "RecordedAlert",
    "TakenAlert",
]

AlertKind = Literal["missed", "late", "failed", "paused"]
ALERT_KINDS: Final[tuple[AlertKind, ...]] = ("missed", "late", "failed", "paused")
# trigger_schedules_alert_deadline (migration 0013): 1 s .. 7 days.
ALERT_DEADLINE_MS_MIN: Final = 1000
ALERT_DEADLINE_MS_MAX: Final = 604_800_000
# ql3.alert_missed_margin_ms(): the longest claim lease (trigger_schedules_claim_window).
ALERT_MISSED_MARGIN_MS: Final = 60_000
# worker_finish_alert_v1 gives an alert up after this many failed delivery attempts.
ALERT_DELIVERY_ATTEMPTS_MAX: Final = 10

_MODEL = ConfigDict(frozen=True, extra="forbid")


class AlertSettings(BaseModel):
    """What one schedule asks to be alerted about (`alert_on`) and how it is told.

    `late` needs `deadline_ms` (how long after its scheduled time a Run must have succeeded). No
    channel is allowed: the alert is still recorded (and counted, and listed), only not sent.
    The bounds are the database CHECKs of migration 0013, refused here first with the field named.
    """

    model_config = _MODEL

    alert_on: tuple[AlertKind, ...] = ()
    command: str | None = Field(default=None, min_length=1, max_length=8192)
    webhook: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    deadline_ms: int | None = Field(
        default=None, ge=ALERT_DEADLINE_MS_MIN, le=ALERT_DEADLINE_MS_MAX
    )

    @model_validator(mode="after")
    def _late_needs_a_deadline(self) -> AlertSettings:
        if "late" in self.alert_on and self.deadline_ms is None:
            msg = "alert_deadline: `late` needs a deadline (how long after the scheduled time)"
            raise ValueError(msg)
        if len(set(self.alert_on)) != len(self.alert_on):
            msg = f"alert_on: each kind once, got {list(self.alert_on)}"
            raise ValueError(msg)
        if self.command is not None and not self.command.strip():
            msg = "alert_command: must not be blank"
            raise ValueError(msg)
        return self


class RecordedAlert(BaseModel):
    """An alert `record_due_alerts` just recorded (`missed` or `late`)."""

    model_config = _MODEL

    alert_id: int
    kind: AlertKind
    schedule_id: int
    subject_key: int


class TakenAlert(BaseModel):
    """A pending alert a worker holds for one delivery attempt (`attempt_number`).

    `alert_id` is the idempotency key every attempt sends (`QL3_ALERT_ID`, `Idempotency-Key`).
    """

    model_config = _MODEL

    alert_id: int
    kind: AlertKind
    schedule_id: int
    schedule_name: str
    subject_key: int
    run_id: int | None
    occurrence_ms: int | None
    detail: dict[str, Any]
    raised_at_ms: int
    command: str | None
    webhook: str | None
    attempt_number: int
    taken_at_ms: int


class AlertRecord(BaseModel):
    """One recorded alert with its delivery so far (`ql3 alerts list`)."""

    model_config = _MODEL

    alert_id: int
    kind: AlertKind
    schedule: str
    subject_key: int
    run_id: int | None
    occurrence_ms: int | None
    raised_at_ms: int
    delivery_state: Literal["pending", "delivered", "failed"]
    delivery_attempts: int
    delivered_at_ms: int | None
    next_delivery_at_ms: int
    last_error: str | None


class AlertCounts(BaseModel):
    """Alerts recorded of one kind, and their failed delivery attempts (the metrics)."""

    model_config = _MODEL

    kind: AlertKind
    alerts: int
    delivery_failures: int
