"""Contract tests (DESIGN §1, §3, §5): caller time rejected, lease bounds, exact claims."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

import pytest
from claims import TOKEN, claim_payload, make_claim
from pydantic import ValidationError
from ql3_runtime_core import (
    CRON_MAX_LENGTH,
    EPOCH_MS_MAX,
    EPOCH_MS_MIN,
    LEASE_MS_DEFAULT,
    LEASE_MS_MAX,
    LEASE_MS_MIN,
    MISFIRE_GRACE_MS_MAX,
    OWNER_ID_MAX_LENGTH,
    ClaimClusterScheduleCommand,
    ClusterScheduleClaim,
    MisfirePolicy,
    ScheduleDefinition,
    same_claim,
    same_grant,
)

COMMAND = {"owner_id": "replica-a", "claim_token": str(TOKEN)}


@pytest.mark.parametrize(
    "field", ["observedAtMs", "observed_at_ms", "clock", "nowMs", "unexpected"]
)
def test_command_rejects_caller_time_and_any_extra_field(field: str) -> None:
    """A claim command with a time (or any other extra) field fails, naming that field."""
    with pytest.raises(ValidationError, match=field) as caught:
        ClaimClusterScheduleCommand.model_validate({**COMMAND, field: 1_700_000_000_000})
    assert caught.value.errors()[0]["type"] == "extra_forbidden"


def test_command_accepts_wire_aliases() -> None:
    """The wire names ownerId, claimToken and leaseMs are accepted."""
    command = ClaimClusterScheduleCommand.model_validate(
        {"ownerId": "replica-b", "claimToken": str(TOKEN), "leaseMs": 5_000}
    )
    assert (command.owner_id, command.claim_token, command.lease_ms) == ("replica-b", TOKEN, 5_000)


def test_command_accepts_python_names() -> None:
    """The snake_case field names are accepted as well."""
    command = ClaimClusterScheduleCommand(owner_id="a", claim_token=TOKEN, lease_ms=1_000)
    assert command.lease_ms == 1_000


def test_command_lease_defaults_to_thirty_seconds() -> None:
    """Without leaseMs the lease is 30 000 ms."""
    assert (
        ClaimClusterScheduleCommand.model_validate(COMMAND).lease_ms == LEASE_MS_DEFAULT == 30_000
    )


@pytest.mark.parametrize("lease", [1_000, 1_001, 30_000, 59_999, 60_000])
def test_command_accepts_lease_within_bounds(lease: int) -> None:
    """Leases from 1 000 to 60 000 ms inclusive are accepted."""
    assert (
        ClaimClusterScheduleCommand.model_validate({**COMMAND, "leaseMs": lease}).lease_ms == lease
    )
    assert (LEASE_MS_MIN, LEASE_MS_MAX) == (1_000, 60_000)


@pytest.mark.parametrize("lease", [999, 60_001, 0, -1, 10**9])
def test_command_rejects_lease_out_of_bounds(lease: int) -> None:
    """Leases outside 1 000..60 000 ms fail, naming the lease field."""
    with pytest.raises(ValidationError, match="lease"):
        ClaimClusterScheduleCommand.model_validate({**COMMAND, "leaseMs": lease})


@pytest.mark.parametrize("lease", ["30000", 30_000.0, True])
def test_command_rejects_non_integer_lease(lease: object) -> None:
    """The lease must be a real integer, not a string, float or bool."""
    with pytest.raises(ValidationError, match="lease"):
        ClaimClusterScheduleCommand.model_validate({**COMMAND, "leaseMs": lease})


@pytest.mark.parametrize("owner", ["", " ", " padded", "padded ", "x" * (OWNER_ID_MAX_LENGTH + 1)])
def test_command_rejects_bad_owner_id(owner: str) -> None:
    """An empty, blank-padded or over-long owner id fails, naming the owner field."""
    with pytest.raises(ValidationError, match="owner"):
        ClaimClusterScheduleCommand.model_validate({**COMMAND, "owner_id": owner})


def test_command_accepts_owner_id_at_max_length() -> None:
    """An owner id of exactly the maximum length is accepted."""
    owner = "x" * OWNER_ID_MAX_LENGTH
    assert (
        ClaimClusterScheduleCommand.model_validate(
            {"ownerId": owner, "claimToken": str(TOKEN)}
        ).owner_id
        == owner
    )


@pytest.mark.parametrize("token", ["not-a-uuid", "", 42])
def test_command_rejects_bad_claim_token(token: object) -> None:
    """The claim token must be a UUID."""
    with pytest.raises(ValidationError, match="claim"):
        ClaimClusterScheduleCommand.model_validate({**COMMAND, "claimToken": token})


def test_command_is_frozen() -> None:
    """A command cannot be changed after validation."""
    command = ClaimClusterScheduleCommand.model_validate(COMMAND)
    with pytest.raises(ValidationError):
        command.lease_ms = 2_000


@pytest.mark.parametrize("lease", [1_000, 30_000, 60_000])
def test_claim_accepts_lease_within_bounds(lease: int) -> None:
    """A claim whose expiry is 1 000..60 000 ms after its acquired time is valid."""
    claim = make_claim(claim_acquired_at_ms=5_000_000, claim_expires_at_ms=5_000_000 + lease)
    assert claim.claim_expires_at_ms - claim.claim_acquired_at_ms == lease


@pytest.mark.parametrize("lease", [999, 60_001, 0, -30_000])
def test_claim_rejects_lease_out_of_bounds(lease: int) -> None:
    """A claim whose expiry is not 1 000..60 000 ms after acquisition fails, naming both fields."""
    with pytest.raises(ValidationError, match="claim_expires_at_ms - claim_acquired_at_ms"):
        make_claim(claim_acquired_at_ms=5_000_000, claim_expires_at_ms=5_000_000 + lease)


@pytest.mark.parametrize("field", ["observedAtMs", "observed_at_ms", "extra"])
def test_claim_rejects_extra_fields(field: str) -> None:
    """A claim carries no extra field, in particular no caller observation."""
    with pytest.raises(ValidationError, match=field):
        ClusterScheduleClaim.model_validate({**claim_payload(), field: 1})


def test_claim_accepts_wire_aliases() -> None:
    """A claim can be read from its camelCase wire form."""
    payload = claim_payload()
    wire = ClusterScheduleClaim.model_validate(payload).model_dump(by_alias=True)
    assert "claimAcquiredAtMs" in wire
    assert ClusterScheduleClaim.model_validate(wire) == ClusterScheduleClaim.model_validate(payload)


def test_same_claim_is_true_for_identical_claims() -> None:
    """Two claims with the same identity fields are the same claim."""
    assert same_claim(make_claim(), make_claim())


def test_same_claim_ignores_cursor_and_definition() -> None:
    """Cursor and definition are not part of a claim's identity."""
    other = make_claim(next_due_at_ms=1, definition={"cron": "0 * * * *"})
    assert same_claim(make_claim(), other)


@pytest.mark.parametrize(
    "change",
    [
        {"schedule_id": 8},
        {"owner_id": "replica-b"},
        {"claim_token": UUID("00000000-0000-4000-8000-000000000000")},
        {"version": 12},
        {"claim_acquired_at_ms": 1_000_001},
        {"claim_expires_at_ms": 1_030_001},
    ],
    ids=["schedule", "owner", "token", "version", "acquired", "expiry"],
)
def test_same_claim_is_false_when_one_identity_field_differs(change: dict[str, Any]) -> None:
    """Changing any single identity field (acquired time included) makes it another claim.

    `same_grant` agrees on every field but the version: a bumped version is still the grant.
    """
    assert not same_claim(make_claim(), make_claim(**change))
    assert not same_claim(make_claim(**change), make_claim())
    assert same_grant(make_claim(), make_claim(**change)) is ("version" in change)
    assert same_grant(make_claim(**change), make_claim()) is ("version" in change)


@dataclass(frozen=True)
class StoredRow:
    """A stored schedule row's claim columns, as a repository reads them back."""

    schedule_id: int
    owner_id: str | None
    claim_token: UUID | None
    version: int
    claim_acquired_at_ms: int
    claim_expires_at_ms: int | None


def _stored(claim: ClusterScheduleClaim) -> StoredRow:
    return StoredRow(
        claim.schedule_id,
        claim.owner_id,
        claim.claim_token,
        claim.version,
        claim.claim_acquired_at_ms,
        claim.claim_expires_at_ms,
    )


def test_same_claim_compares_a_claim_with_its_stored_row() -> None:
    """A stored row holding the claim's six fields is the same claim; a released row is not."""
    claim = make_claim()
    assert same_claim(claim, _stored(claim))
    assert same_claim(_stored(claim), claim)
    released = replace(_stored(claim), owner_id=None, claim_token=None, claim_expires_at_ms=None)
    assert not same_claim(claim, released)
    assert same_grant(claim, _stored(claim))
    assert not same_grant(claim, released)


def test_definition_defaults() -> None:
    """A definition defaults to UTC, fire_once and a 60 s grace with an open window."""
    definition = ScheduleDefinition(cron="*/5 * * * *")
    assert definition.timezone == "UTC"
    assert definition.misfire_policy is MisfirePolicy.FIRE_ONCE
    assert (definition.misfire_grace_ms, definition.start_at_ms, definition.end_at_ms) == (
        60_000,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cron": "61 * * * *"}, "61 \\* \\* \\* \\*"),
        ({"timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"misfire_grace_ms": -1}, "misfire_grace_ms"),
        ({"misfire_policy": "sometimes"}, "misfire_policy"),
        ({"start_at_ms": 10, "end_at_ms": 5}, "end_at_ms"),
    ],
)
def test_definition_rejects_bad_values_naming_them(change: dict[str, Any], named: str) -> None:
    """A bad cron, zone, grace, policy or window fails with the bad field or value named."""
    with pytest.raises(ValidationError, match=named):
        ScheduleDefinition.model_validate({"cron": "* * * * *", **change})


@pytest.mark.parametrize(
    ("field", "value", "bound"),
    [
        ("misfire_grace_ms", MISFIRE_GRACE_MS_MAX + 1, f"0..{MISFIRE_GRACE_MS_MAX}"),
        ("misfire_grace_ms", 99_999_999_999_999_999_999, f"0..{MISFIRE_GRACE_MS_MAX}"),
        ("misfire_grace_ms", -1, f"0..{MISFIRE_GRACE_MS_MAX}"),
        ("start_at_ms", EPOCH_MS_MIN - 1, f"{EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
        ("start_at_ms", EPOCH_MS_MAX + 1, f"{EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
        ("end_at_ms", 2**63, f"{EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
        ("end_at_ms", -(2**63), f"{EPOCH_MS_MIN}..{EPOCH_MS_MAX}"),
    ],
)
def test_definition_refuses_numbers_out_of_bounds_naming_field_and_bound(
    field: str, value: int, bound: str
) -> None:
    """A grace or window end outside its range fails with one error naming the field and range."""
    with pytest.raises(ValidationError) as caught:
        ScheduleDefinition.model_validate({"cron": "* * * * *", field: value})
    errors = caught.value.errors()
    assert [error["loc"] for error in errors] == [(field,)]
    assert f"{field}: must be within {bound}" in errors[0]["msg"]
    assert str(value) in errors[0]["msg"]


def test_definition_accepts_numbers_at_their_bounds() -> None:
    """The largest grace (7 days) and the widest window are accepted as given."""
    definition = ScheduleDefinition(
        cron="* * * * *",
        misfire_grace_ms=MISFIRE_GRACE_MS_MAX,
        start_at_ms=EPOCH_MS_MIN,
        end_at_ms=EPOCH_MS_MAX,
    )
    assert (definition.misfire_grace_ms, definition.start_at_ms, definition.end_at_ms) == (
        604_800_000,
        0,
        EPOCH_MS_MAX,
    )


def test_definition_refuses_a_cron_longer_than_the_database_allows() -> None:
    """A valid expression longer than CRON_MAX_LENGTH once normalized is refused, naming cron."""
    long_list = ",".join(["0"] * 600) + " * * * *"
    with pytest.raises(ValidationError, match=f"at most {CRON_MAX_LENGTH}") as caught:
        ScheduleDefinition(cron=long_list)
    assert caught.value.errors()[0]["loc"] == ("cron",)
    fits = ",".join(["0"] * 495 + ["10"]) + " * * * *"
    assert len(ScheduleDefinition(cron=fits).cron) == 1_000
