"""Claim contracts (DESIGN §1, §3): the claim command, the claim, the schedule definition.

None of these models carries a caller-supplied time: the only observation in a claim is
`claim_acquired_at_ms`, which the database wrote with `clock_timestamp()` (rule zero).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Protocol, Self
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ._cron import validate_cron_expression
from ._errors import InvalidCronError
from ._limits import CRON_MAX_LENGTH, EPOCH_MS_MAX, EPOCH_MS_MIN, MISFIRE_GRACE_MS_MAX
from ._zones import load_timezone

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "LEASE_MS_DEFAULT",
    "LEASE_MS_MAX",
    "LEASE_MS_MIN",
    "OWNER_ID_MAX_LENGTH",
    "ClaimClusterScheduleCommand",
    "ClusterScheduleClaim",
    "ExactClaim",
    "MisfirePolicy",
    "ScheduleDefinition",
    "ScheduleState",
    "same_claim",
]

LEASE_MS_MIN = 1_000
LEASE_MS_MAX = 60_000
LEASE_MS_DEFAULT = 30_000
OWNER_ID_MAX_LENGTH = 200

_CONTRACT = ConfigDict(
    frozen=True,
    extra="forbid",
    alias_generator=to_camel,
    populate_by_name=True,
    validate_by_name=True,
    validate_by_alias=True,
)


class MisfirePolicy(StrEnum):
    """What to do with occurrences that are due but later than the grace (DESIGN §4).

    - `FIRE_ONCE`: admit only the latest missed occurrence (the default).
    - `SKIP`: admit no missed occurrence.
    - `CATCH_UP`: admit every missed occurrence, oldest first, within the cycle budget.
    On-time occurrences are admitted under every policy.
    """

    FIRE_ONCE = "fire_once"
    SKIP = "skip"
    CATCH_UP = "catch_up"


class ScheduleState(StrEnum):
    """Life cycle of a schedule row.

    - `ACTIVE`: claimable when due.
    - `PAUSED`: kept with its cursor, never claimed until resumed.
    - `EXHAUSTED`: the cursor passed `end_at_ms`; nothing will ever be due again.
    - `RETIRED`: removed by an operator; history is kept, the schedule is never claimed.
    - `INVALID`: quarantined: no replica could read or decide it (its record keeps the reason);
      never claimed until an operator fixes its definition or resumes it.
    """

    ACTIVE = "active"
    PAUSED = "paused"
    EXHAUSTED = "exhausted"
    RETIRED = "retired"
    INVALID = "invalid"


def _bounded(field: str, low: int, high: int, meaning: str) -> Callable[[int], int]:
    """Return a validator refusing `field` outside `low..high`, naming the field and its bound."""

    def check(value: int) -> int:
        if not low <= value <= high:
            msg = f"{field}: must be within {low}..{high} ({meaning}), got {value}"
            raise ValueError(msg)
        return value

    return check


_EPOCH_RANGE = "1970-01-01 to 9999-12-29 UTC in epoch ms"

OwnerId = Annotated[
    str, Field(min_length=1, max_length=OWNER_ID_MAX_LENGTH, pattern=r"^\S(.*\S)?$")
]
LeaseMs = Annotated[int, Field(ge=LEASE_MS_MIN, le=LEASE_MS_MAX, strict=True)]
# Bounds named in the message, so a caller (and `ql3 schedule add`) sees the field and its range.
GraceMs = Annotated[
    int, AfterValidator(_bounded("misfire_grace_ms", 0, MISFIRE_GRACE_MS_MAX, "ms, at most 7 days"))
]
StartMs = Annotated[
    int, AfterValidator(_bounded("start_at_ms", EPOCH_MS_MIN, EPOCH_MS_MAX, _EPOCH_RANGE))
]
EndMs = Annotated[
    int, AfterValidator(_bounded("end_at_ms", EPOCH_MS_MIN, EPOCH_MS_MAX, _EPOCH_RANGE))
]


class ClaimClusterScheduleCommand(BaseModel):
    """What a Coordinator asks for when it claims (DESIGN §3): who, with which token, how long.

    It has no time field on purpose: `observedAtMs` and any other extra field are rejected, so a
    caller cannot smuggle its wall clock into due-ness or takeover.
    """

    model_config = _CONTRACT

    owner_id: OwnerId
    claim_token: UUID
    lease_ms: LeaseMs = LEASE_MS_DEFAULT


class ScheduleDefinition(BaseModel):
    """The part of a schedule row that a cron and misfire decision needs.

    Every field is bounded here, before any engine or database sees it: the grace by the
    database's own CHECK (0 to `MISFIRE_GRACE_MS_MAX`, 7 days), the window ends by the epoch range
    the cron engine computes in (`EPOCH_MS_MIN` to `EPOCH_MS_MAX`), the normalized cron text by the
    database's `CRON_MAX_LENGTH`.
    """

    model_config = _CONTRACT

    cron: str
    timezone: str = "UTC"
    misfire_policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    misfire_grace_ms: GraceMs = 60_000
    start_at_ms: StartMs | None = None
    end_at_ms: EndMs | None = None

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        normalized = validate_cron_expression(value)
        if len(normalized) > CRON_MAX_LENGTH:
            reason = f"{len(normalized)} characters, at most {CRON_MAX_LENGTH}"
            raise InvalidCronError(value, reason)
        return normalized

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        load_timezone(value)
        return value

    @model_validator(mode="after")
    def _check_window(self) -> Self:
        if (
            self.start_at_ms is not None
            and self.end_at_ms is not None
            and self.end_at_ms < self.start_at_ms
        ):
            msg = f"end_at_ms={self.end_at_ms} is earlier than start_at_ms={self.start_at_ms}"
            raise ValueError(msg)
        return self


class ClusterScheduleClaim(BaseModel):
    """A claim the database granted (DESIGN §3).

    `claim_acquired_at_ms` is the database observation of the claim statement, durable as the
    row's `updated_at_ms`; every decision about this claim uses it and nothing else (DESIGN §4).
    """

    model_config = _CONTRACT

    schedule_id: int
    task_id: int
    version: int
    owner_id: OwnerId
    claim_token: UUID
    claim_acquired_at_ms: int
    claim_expires_at_ms: int
    next_due_at_ms: int
    definition: ScheduleDefinition

    @model_validator(mode="after")
    def _check_lease(self) -> Self:
        lease = self.claim_expires_at_ms - self.claim_acquired_at_ms
        if not LEASE_MS_MIN <= lease <= LEASE_MS_MAX:
            msg = (
                f"claim_expires_at_ms - claim_acquired_at_ms = {lease} ms is outside"
                f" {LEASE_MS_MIN}..{LEASE_MS_MAX}"
            )
            raise ValueError(msg)
        return self


class ExactClaim(Protocol):
    """The six fields that make one claim exact (DESIGN §5), as a claim or a stored row has them.

    `ClusterScheduleClaim` is one; a stored schedule row read by a repository is another, with
    `owner_id`, `claim_token` and `claim_expires_at_ms` None when nobody holds it and
    `claim_acquired_at_ms` being the row's `updated_at_ms` (which the claim statement writes).
    """

    @property
    def schedule_id(self) -> int:
        """The schedule the claim is on."""
        ...

    @property
    def owner_id(self) -> str | None:
        """Who holds it."""
        ...

    @property
    def claim_token(self) -> UUID | None:
        """The token of the claim round that granted it."""
        ...

    @property
    def version(self) -> int:
        """The row version the claim wrote."""
        ...

    @property
    def claim_acquired_at_ms(self) -> int:
        """The database observation of the claim statement."""
        ...

    @property
    def claim_expires_at_ms(self) -> int | None:
        """Acquired time plus the lease."""
        ...


def same_claim(left: ExactClaim, right: ExactClaim) -> bool:
    """Tell whether two claims are the exact same claim; the one comparison used everywhere.

    Identity is schedule, owner, token, version, acquired time and expiry: a claim re-granted
    with the same token but a new acquired time is a different claim (DESIGN §5). Python checks
    (a repository asking whether a claim still stands on its stored row) use this; the SQL
    fences of the commit and the quarantine state the same six equalities as their own
    predicate (the release states `same_grant`'s five), and a test against PostgreSQL pins that
    each agrees with its Python twin.
    """
    return left.version == right.version and same_grant(left, right)


def same_grant(left: ExactClaim, right: ExactClaim) -> bool:
    """Tell whether two claims are one grant, whatever changed the row's version since.

    Identity is schedule, owner, token, acquired time and expiry: what only the claim statement
    writes. An admin change, a pause or a zone rules adopt bumps the version of a claimed row and
    leaves its claim columns (DESIGN §5): the holder's commit then races (`same_claim` fails),
    but the claim on the row is still the holder's grant, and only the holder clears it. The
    release fence compares this (its SQL states these five equalities), so a holder whose commit
    raced hands its claim back at once instead of leaving it at rest until the schedule is next
    due. A release writes no decision, so the definition it was decided on does not matter.
    """
    return (
        left.schedule_id == right.schedule_id
        and left.owner_id == right.owner_id
        and left.claim_token == right.claim_token
        and left.claim_acquired_at_ms == right.claim_acquired_at_ms
        and left.claim_expires_at_ms == right.claim_expires_at_ms
    )
