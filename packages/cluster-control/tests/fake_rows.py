"""What the in-memory repository (fake_repository.py) holds: schedule rows and a node's reading."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID  # noqa: TC003  # dataclass fields resolve at runtime

from ql3_runtime_core import ReplicationState, ScheduleDefinition, ScheduleState


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
