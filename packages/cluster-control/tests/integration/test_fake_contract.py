"""The behaviours the Coordinator and its service rely on, against the fake AND PostgreSQL.

Written once and parametrised, so the in-memory fake used by the unit tests cannot drift from
the real repository (a fake is trusted only while the same tests pass against both). Both are
typed as `ql3_runtime_core.ServiceRepository`, the protocol runtime-core declares, so mypy
checks that each implements all of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator  # noqa: TC003  # pytest resolves fixture annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import pytest
from fake_repository import FakeRepository
from fix_db import db_now_ms, sql_rows, wait_for
from history import add_schedules
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClusterScheduleClaim,
    CommitStatus,
    ServiceRepository,
    checked_commit,
    resolve_cluster_schedule_decision,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


class Harness(Protocol):
    """A repository plus a way to make schedules due and to let database time pass."""

    @property
    def repo(self) -> ServiceRepository:
        """The repository under test."""
        ...

    def add_due(self, count: int) -> list[int]:
        """Add `count` every-second schedules and wait until they are due."""
        ...

    def now_ms(self) -> int:
        """Read the store's clock."""
        ...

    def pass_time_until(self, at_ms: int) -> None:
        """Let the store's clock reach `at_ms`."""
        ...

    def plant_unreadable(self) -> int:
        """Add a due schedule whose stored definition no replica can read; return its id."""
        ...

    def record_zone_rules(self, version: str) -> None:
        """Record `version` as the store's zone rules, without storing its rule data."""
        ...

    def fence(self, schedule_id: int) -> None:
        """Bump the row's version, claim left as it is (as an admin change or an adopt does)."""
        ...


@dataclass
class FakeHarness:
    """The in-memory fake; time passes by moving its clock."""

    repo: FakeRepository

    def add_due(self, count: int) -> list[int]:
        """Add schedules due now."""
        return [self.repo.add(first_due_ms=self.repo.now_ms).schedule_id for _ in range(count)]

    def now_ms(self) -> int:
        """Read the fake clock."""
        return self.repo.now_ms

    def pass_time_until(self, at_ms: int) -> None:
        """Move the fake clock forward."""
        self.repo.now_ms = max(self.repo.now_ms, at_ms)

    def plant_unreadable(self) -> int:
        """Plant a row with an out-of-range minute, due now."""
        return self.repo.plant(cron="61 * * * *").schedule_id

    def record_zone_rules(self, version: str) -> None:
        """Record `version`; the fake stores data only for the versions in `zone_rules_stored`."""
        self.repo.zone_rules_recorded = version

    def fence(self, schedule_id: int) -> None:
        """Bump the fake row's version."""
        self.repo.schedules[schedule_id].version += 1


@dataclass
class PostgresHarness:
    """The real repository; time passes by waiting for the database clock."""

    repo: PostgresScheduleRepository
    db: Ql3Database

    def add_due(self, count: int) -> list[int]:
        """Add schedules and wait until the database clock reaches their first cursor."""
        first = add_schedules(self.db.dsn("admin"), count, prefix=f"c{uuid.uuid4().hex[:6]}")
        self.pass_time_until(max(first.values()))
        return list(first)

    def now_ms(self) -> int:
        """Read the database clock."""
        return db_now_ms(self.db.superuser_dsn)

    def pass_time_until(self, at_ms: int) -> None:
        """Wait (monotonic deadline) until the database clock reaches `at_ms`."""
        wait_for(lambda: self.now_ms() >= at_ms, timeout_s=10, what="database time to pass")

    def plant_unreadable(self) -> int:
        """Add a schedule, give it a zone no rules know (as the superuser), wait until due."""
        first = add_schedules(self.db.dsn("admin"), 1, prefix=f"bad{uuid.uuid4().hex[:6]}")
        (schedule_id,) = first
        sql_rows(
            self.db.superuser_dsn,
            "UPDATE ql3.trigger_schedules SET timezone = 'Mars/Olympus' WHERE id = %s",
            [schedule_id],
        )
        self.pass_time_until(first[schedule_id])
        return schedule_id

    def record_zone_rules(self, version: str) -> None:
        """Record `version` as the owner would, without storing its rule data."""
        sql_rows(self.db.dsn("owner"), "UPDATE ql3.zone_rules SET version = %s", [version])

    def fence(self, schedule_id: int) -> None:
        """Bump the version as `fence_claims_for_zone_rules.sql` does (as the superuser)."""
        sql_rows(
            self.db.superuser_dsn,
            "UPDATE ql3.trigger_schedules SET version = version + 1 WHERE id = %s",
            [schedule_id],
        )


@pytest.fixture(params=["fake", "postgres"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """Each contract test runs once against the fake and once against PostgreSQL."""
    if request.param == "fake":
        yield FakeHarness(FakeRepository())
        return
    db: Ql3Database = request.getfixturevalue("ql3_db")
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        yield PostgresHarness(repo, db)


def _claim(harness: Harness, owner: str, lease_ms: int = 5_000) -> list[ClusterScheduleClaim]:
    command = ClaimClusterScheduleCommand(
        owner_id=owner, claim_token=uuid.uuid4(), lease_ms=lease_ms
    )
    return harness.repo.claim_due_schedules(command, 16)


def test_claim_stamps_one_store_observation_and_the_lease(harness: Harness) -> None:
    """A claim round carries one acquired time from the store and expiry = acquired + lease."""
    harness.add_due(2)
    before = harness.now_ms()
    claims = _claim(harness, "a", lease_ms=7_000)
    assert len(claims) == 2
    assert len({claim.claim_acquired_at_ms for claim in claims}) == 1
    assert all(c.claim_expires_at_ms - c.claim_acquired_at_ms == 7_000 for c in claims)
    assert claims[0].claim_acquired_at_ms >= before
    assert _claim(harness, "b") == []


def test_commit_after_takeover_is_raced_and_writes_nothing(harness: Harness) -> None:
    """A claim taken over after expiry cannot commit; the new holder can, exactly once."""
    harness.add_due(1)
    stale = _claim(harness, "stale", lease_ms=1_000)
    harness.pass_time_until(stale[0].claim_expires_at_ms)
    fresh = _claim(harness, "fresh")
    assert len(fresh) == 1

    def commit(claims: list[ClusterScheduleClaim]) -> list[CommitStatus]:
        commits = [
            checked_commit(c, resolve_cluster_schedule_decision(c, 256), 256) for c in claims
        ]
        return [outcome.status for outcome in harness.repo.commit_decisions(commits).outcomes]

    assert commit(stale) == [CommitStatus.RACED]
    assert commit(fresh) == [CommitStatus.COMMITTED]


def test_release_is_exact_and_frees_the_row_at_once(harness: Harness) -> None:
    """Releasing a standing claim frees it immediately; releasing it again does nothing."""
    harness.add_due(1)
    claims = _claim(harness, "a", lease_ms=60_000)
    assert harness.repo.release_claims(claims) == 1
    assert harness.repo.release_claims(claims) == 0
    assert len(_claim(harness, "b")) == 1


def test_a_claim_fenced_under_its_holder_races_its_commit_but_is_released(
    harness: Harness,
) -> None:
    """A version bump races the commit (exact claim) but not the release (the grant)."""
    (schedule_id,) = harness.add_due(1)
    claims = _claim(harness, "a", lease_ms=60_000)
    harness.fence(schedule_id)
    (claim,) = claims
    commit = checked_commit(claim, resolve_cluster_schedule_decision(claim, 256), 256)
    (outcome,) = harness.repo.commit_decisions([commit]).outcomes
    assert outcome.status is CommitStatus.RACED
    assert harness.repo.release_claims(claims) == 1
    assert len(_claim(harness, "b")) == 1


def test_next_due_hint_is_zero_when_due_and_none_when_empty(harness: Harness) -> None:
    """The sleep hint is None with no schedules and 0 once one is due."""
    assert harness.repo.next_due_in_ms() is None
    harness.add_due(1)
    assert harness.repo.next_due_in_ms() == 0


def test_an_unreadable_row_is_quarantined_and_the_rest_claimed(harness: Harness) -> None:
    """A claim round quarantines the row it cannot read (with a reason) and claims the others."""
    bad = harness.plant_unreadable()
    good = harness.add_due(2)
    command = ClaimClusterScheduleCommand(owner_id="a", claim_token=uuid.uuid4(), lease_ms=5_000)
    claim_round = harness.repo.claim_round(command, 16)
    assert sorted(claim.schedule_id for claim in claim_round.claims) == sorted(good)
    assert [item.schedule_id for item in claim_round.quarantined] == [bad]
    assert claim_round.quarantined[0].reason.startswith("unreadable schedule row: ")
    assert (
        claim_round.quarantined[0].quarantined_at_ms >= claim_round.claims[0].claim_acquired_at_ms
    )
    assert _claim(harness, "b") == []


def test_quarantine_needs_the_exact_claim(harness: Harness) -> None:
    """Quarantine of a claim taken over does nothing; of the standing claim it removes the row."""
    harness.add_due(1)
    stale = _claim(harness, "stale", lease_ms=1_000)
    harness.pass_time_until(stale[0].claim_expires_at_ms)
    fresh = _claim(harness, "fresh")
    assert harness.repo.quarantine_claims([(stale[0], "decision failed: x")]) == ()
    (done,) = harness.repo.quarantine_claims([(fresh[0], "decision failed: x")])
    assert (done.schedule_id, done.reason) == (fresh[0].schedule_id, "decision failed: x")
    harness.pass_time_until(fresh[0].claim_expires_at_ms)
    assert _claim(harness, "later") == []
    assert harness.repo.next_due_in_ms() is None


def test_a_replica_that_cannot_load_the_recorded_rules_claims_nothing(harness: Harness) -> None:
    """Recorded rules whose data the store lacks: nothing claimed, the check says why."""
    harness.add_due(1)
    loaded = harness.repo.read_cluster_state().zone_rules
    assert loaded.agrees
    assert loaded.recorded_version is not None
    command = ClaimClusterScheduleCommand(owner_id="x", claim_token=uuid.uuid4(), lease_ms=5_000)
    harness.record_zone_rules("1999z")
    refused = harness.repo.claim_round(command, 16)
    assert refused.claims == ()
    assert (refused.zone_rules.local_version, refused.zone_rules.recorded_version) == (
        loaded.local_version,
        "1999z",
    )
    assert not refused.zone_rules.agrees
    assert "no rule data for tzdata 1999z" in (refused.zone_rules.problem or "")
    harness.record_zone_rules(loaded.recorded_version)
    assert len(_claim(harness, "same-rules")) == 1


def test_the_service_reads_schema_cluster_state_and_overdue(harness: Harness) -> None:
    """The schema check passes, the cluster state counts a quarantined row, nothing is overdue."""
    assert harness.repo.check_schema() >= 1
    fresh = harness.repo.read_cluster_state()
    assert fresh.zone_rules.agrees
    assert fresh.invalid_schedules == 0
    harness.plant_unreadable()
    harness.add_due(1)
    command = ClaimClusterScheduleCommand(owner_id="a", claim_token=uuid.uuid4(), lease_ms=5_000)
    assert len(harness.repo.claim_round(command, 16).quarantined) == 1
    assert harness.repo.read_cluster_state().invalid_schedules == 1
    # Due just now, far less than lease + grace (60 s) behind: a replica can still decide it.
    assert harness.repo.count_overdue_schedules(5_000) == 0


def test_a_wait_without_a_change_times_out(harness: Harness) -> None:
    """Waiting for a wake-up with nothing changed returns False once the timeout passed."""
    assert harness.repo.wait_for_wakeup(0.05) is False
    harness.repo.close()
