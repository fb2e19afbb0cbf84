"""What the in-memory repository (fake_repository.py) holds, and how a test puts rows into it.

Schedule rows, a node's replication reading, and `ScheduleRows`: the set-up helpers the fake
mixes in, kept here so that the fake itself holds only the repository's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID  # noqa: TC003  # dataclass fields resolve at runtime

from ql3_runtime_core import (
    MisfirePolicy,
    ReplicationState,
    ScheduleDefinition,
    ScheduleState,
    next_occurrence_ms,
)


def fake_node(**changes: object) -> ReplicationState:
    """Return a node reading: by default a lone primary on timeline 1; `changes` override it."""
    fields: dict[str, object] = {
        "host": "127.0.0.1",
        "port": 5432,
        "system_identifier": "7000000000000000001",
        "timeline": 1,
        "in_recovery": False,
        "standbys": 0,
        "commits_wait_for_standby": False,
        "synchronous_standby_names": "",
        "synchronous_commit": "on",
    }
    fields.update(changes)
    return ReplicationState.model_validate(fields)


@dataclass
class FakeSchedule:
    """One schedule row."""

    schedule_id: int
    task_id: int
    definition: ScheduleDefinition
    next_due_at_ms: int | None
    state: ScheduleState = ScheduleState.ACTIVE
    version: int = 0
    updated_at_ms: int = 0
    claim_owner_id: str | None = None
    claim_token: UUID | None = None
    claim_expires_at_ms: int | None = None
    invalid_reason: str | None = None
    invalidated_at_ms: int | None = None

    # With these two the row is a `ql3_runtime_core.ExactClaim`, judged by `same_claim` like the
    # PostgreSQL repository's stored row: the claim stamps its acquired time as `updated_at_ms`.
    @property
    def owner_id(self) -> str | None:
        """Who holds the row's claim (None when nobody does)."""
        return self.claim_owner_id

    @property
    def claim_acquired_at_ms(self) -> int:
        """The acquired time of the claim that stamped the row."""
        return self.updated_at_ms


class ScheduleRows:
    """How a test puts schedule rows into the fake store (the set-up side of FakeRepository).

    A mixin, so the fake's repository methods stay in fake_repository.py; the class that mixes it
    in owns the two attributes it reads.
    """

    now_ms: int
    schedules: dict[int, FakeSchedule]

    def add(self, cron: str = "* * * * * *", *, first_due_ms: int | None = None) -> FakeSchedule:
        """Add an active schedule whose cursor is its next occurrence after now (or given)."""
        definition = ScheduleDefinition(cron=cron)
        schedule_id = len(self.schedules) + 1
        due = (
            first_due_ms
            if first_due_ms is not None
            else next_occurrence_ms(cron, "UTC", self.now_ms)
        )
        row = FakeSchedule(
            schedule_id, 100 + schedule_id, definition, due, updated_at_ms=self.now_ms
        )
        self.schedules[schedule_id] = row
        return row

    def plant(
        self, cron: str = "* * * * * *", timezone: str = "UTC", *, first_due_ms: int | None = None
    ) -> FakeSchedule:
        """Add an active row holding a definition no validation passed (as if written by SQL)."""
        definition = ScheduleDefinition.model_construct(
            cron=cron,
            timezone=timezone,
            misfire_policy=MisfirePolicy.FIRE_ONCE,
            misfire_grace_ms=60_000,
            start_at_ms=None,
            end_at_ms=None,
        )
        schedule_id = len(self.schedules) + 1
        due = self.now_ms if first_due_ms is None else first_due_ms
        row = FakeSchedule(
            schedule_id, 100 + schedule_id, definition, due, updated_at_ms=self.now_ms
        )
        self.schedules[schedule_id] = row
        return row
