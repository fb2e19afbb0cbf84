"""Builders for claims and decisions shared by the runtime-core unit tests."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ql3_runtime_core import ClusterScheduleClaim, ScheduleDecision, ScheduleState

__all__ = ["TOKEN", "claim_payload", "make_claim", "make_decision", "observed_claim"]

TOKEN = UUID("8d7c1c64-3f0c-4d0e-9d5a-2b8e4c1f0a11")


def claim_payload(**overrides: Any) -> dict[str, Any]:
    """Return the fields of a valid claim (acquired at 1 000 000 ms, 30 s lease), with overrides."""
    definition: dict[str, Any] = {"cron": "*/5 * * * *", "timezone": "UTC"}
    definition.update(overrides.pop("definition", {}))
    payload: dict[str, Any] = {
        "schedule_id": 7,
        "task_id": 3,
        "version": 11,
        "owner_id": "replica-a",
        "claim_token": TOKEN,
        "claim_acquired_at_ms": 1_000_000,
        "claim_expires_at_ms": 1_030_000,
        "next_due_at_ms": 900_000,
        "definition": definition,
    }
    payload.update(overrides)
    return payload


def make_claim(**overrides: Any) -> ClusterScheduleClaim:
    """Build a valid claim; keyword arguments replace fields (`definition` merges)."""
    return ClusterScheduleClaim.model_validate(claim_payload(**overrides))


def observed_claim(observed: int, cursor: int, **definition: Any) -> ClusterScheduleClaim:
    """Build a claim acquired at `observed` (30 s lease) with cursor `cursor` and `definition`."""
    return make_claim(
        claim_acquired_at_ms=observed,
        claim_expires_at_ms=observed + 30_000,
        next_due_at_ms=cursor,
        definition=definition,
    )


def make_decision(claim: ClusterScheduleClaim, **overrides: Any) -> ScheduleDecision:
    """Build a decision for `claim` that normalization accepts, with overrides."""
    payload: dict[str, Any] = {
        "schedule_id": claim.schedule_id,
        "occurrences": (claim.next_due_at_ms,),
        "next_due_at_ms": claim.next_due_at_ms + 300_000,
        "state": ScheduleState.ACTIVE,
        "observed_at_ms": claim.claim_acquired_at_ms,
    }
    payload.update(overrides)
    return ScheduleDecision.model_validate(payload)
