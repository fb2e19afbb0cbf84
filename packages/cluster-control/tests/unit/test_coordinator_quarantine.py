"""One schedule never stops the others (DESIGN §8): Coordinator cycles against the fake store."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest
from fake_repository import FakeRepository
from ql3_cluster_control import Coordinator, CoordinatorMetrics
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClaimRound,
    ClusterScheduleClaim,
    MisfirePolicy,
    QuarantinedSchedule,
    ScheduleDefinition,
    ScheduleState,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

BAD_CRON = "61 * * * *"


class UndecidableClaims(FakeRepository):
    """The fake store, handing out chosen claims with a definition their decision chokes on.

    The stored rows read fine (so the claim does not quarantine them); what reaches the
    Coordinator's decision is `broken`, as if the decision met data it cannot handle.
    """

    def __init__(self, broken: ScheduleDefinition, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.broken = broken
        self.undecidable: set[int] = set()
        self.lose_quarantine_race = False

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim as usual, then swap in the broken definition for the chosen schedules."""
        claim_round = super().claim_round(command, limit)
        claims = tuple(
            claim.model_copy(update={"definition": self.broken})
            if claim.schedule_id in self.undecidable
            else claim
            for claim in claim_round.claims
        )
        return claim_round.model_copy(update={"claims": claims})

    def quarantine_claims(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]]
    ) -> tuple[QuarantinedSchedule, ...]:
        """Quarantine, or first let an admin change the rows once (their claims no longer stand)."""
        if self.lose_quarantine_race:
            self.lose_quarantine_race = False
            for claim, _ in failures:
                self.schedules[claim.schedule_id].version += 1
        return super().quarantine_claims(failures)


def _coordinator(repo: FakeRepository, **kwargs: Any) -> Coordinator:
    return Coordinator(repo, owner_id="replica-a", lease_ms=5_000, **kwargs)


def _broken(**fields: Any) -> ScheduleDefinition:
    values: dict[str, Any] = {
        "cron": "* * * * * *",
        "timezone": "UTC",
        "misfire_policy": MisfirePolicy.FIRE_ONCE,
        "misfire_grace_ms": 60_000,
        "start_at_ms": None,
        "end_at_ms": None,
    }
    values.update(fields)
    return ScheduleDefinition.model_construct(**values)


def test_unreadable_rows_are_quarantined_and_the_others_admitted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claim's quarantines are logged as WARNINGs with id and reason, counted, and summed."""
    repo = FakeRepository()
    bad = repo.plant(cron=BAD_CRON).schedule_id
    good = [repo.add(first_due_ms=repo.now_ms).schedule_id for _ in range(3)]
    metrics = CoordinatorMetrics()
    with caplog.at_level(logging.WARNING, logger="ql3_cluster_control"):
        result = _coordinator(repo, metrics=metrics).run_cycle()
    assert [item.schedule_id for item in result.quarantined] == [bad]
    assert result.summary.quarantined == 1
    assert sorted({run.schedule_id for run in result.admitted}) == good
    assert repo.schedules[bad].state is ScheduleState.INVALID
    assert repo.schedules[bad].claim_token is None
    assert metrics.registry.get_sample_value("ql3_schedules_quarantined_total") == 1
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "schedule.quarantined"]
    assert record.levelno == logging.WARNING
    assert record.schedule_id == bad  # type: ignore[attr-defined]
    assert BAD_CRON in record.reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("broken", "error"),
    [
        (_broken(cron=BAD_CRON), "InvalidCronError"),
        (_broken(timezone="Mars/Olympus"), "UnknownTimezoneError"),
        (_broken(misfire_grace_ms=None), "TypeError"),
    ],
)
def test_a_decision_that_raises_quarantines_only_its_schedule(
    broken: ScheduleDefinition, error: str
) -> None:
    """Any exception from one claim's decision quarantines it; the round commits the rest."""
    repo = UndecidableClaims(broken)
    rows = [repo.add(first_due_ms=repo.now_ms) for _ in range(4)]
    repo.undecidable = {rows[1].schedule_id}
    coordinator = _coordinator(repo)
    result = coordinator.run_cycle()
    (item,) = result.quarantined
    assert item.schedule_id == rows[1].schedule_id
    assert item.reason.startswith(f"decision failed: {error}: ")
    assert repo.schedules[item.schedule_id].state is ScheduleState.INVALID
    assert repo.schedules[item.schedule_id].invalid_reason == item.reason
    assert sorted({run.schedule_id for run in result.admitted}) == [
        rows[0].schedule_id,
        rows[2].schedule_id,
        rows[3].schedule_id,
    ]
    assert coordinator.held_claims == ()
    # The loop goes on: the next cycle runs and admits the healthy schedules' next occurrences.
    repo.now_ms += 1_000
    assert coordinator.run_cycle().summary.admitted == 3


def test_a_round_that_only_quarantines_does_not_end_the_cycle() -> None:
    """Bad rows filling a whole claim batch do not hide the healthy rows due behind them."""
    repo = FakeRepository()
    for _ in range(2):
        repo.plant(cron=BAD_CRON, first_due_ms=repo.now_ms - 1_000)
    good = [repo.add(first_due_ms=repo.now_ms).schedule_id for _ in range(2)]
    result = _coordinator(repo, claim_batch=2).run_cycle()
    assert len(result.quarantined) == 2
    assert sorted({run.schedule_id for run in result.admitted}) == good


def test_a_quarantine_whose_claim_moved_on_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """When the fence refuses the quarantine (an admin change), the cycle warns and goes on.

    The claim the admin change left on the row is handed back at once, so the next round claims
    the row as it now is: still undecidable here, so quarantined then, within the same cycle.
    """
    repo = UndecidableClaims(_broken(cron=BAD_CRON))
    rows = [repo.add(first_due_ms=repo.now_ms) for _ in range(2)]
    repo.undecidable = {rows[0].schedule_id}
    repo.lose_quarantine_race = True
    coordinator = _coordinator(repo)
    with caplog.at_level(logging.INFO, logger="ql3_cluster_control"):
        result = coordinator.run_cycle()
    events = [getattr(r, "event", "") for r in caplog.records]
    assert events.count("schedule.quarantine_raced") == 1
    (released,) = [r for r in caplog.records if getattr(r, "event", "") == "claims.raced_released"]
    assert (released.released, released.raced) == (1, 1)  # type: ignore[attr-defined]
    assert [item.schedule_id for item in result.quarantined] == [rows[0].schedule_id]
    assert repo.schedules[rows[0].schedule_id].state is ScheduleState.INVALID
    assert {run.schedule_id for run in result.admitted} == {rows[1].schedule_id}
    assert coordinator.held_claims == ()


def test_unloadable_zone_rules_claim_nothing_and_say_so() -> None:
    """While the recorded rules cannot be loaded, a cycle claims nothing and reports why."""
    repo = FakeRepository(zone_rules_recorded="1999z")
    repo.add(first_due_ms=repo.now_ms)
    coordinator = _coordinator(repo)
    refused = coordinator.run_cycle()
    assert refused.summary.claims == 0
    assert refused.zone_rules is not None
    assert (refused.zone_rules.local_version, refused.zone_rules.recorded_version) == (
        None,
        "1999z",
    )
    assert repo.runs == []
    repo.zone_rules_stored.add("1999z")  # its data was stored (`ql3 migrate` from such a node)
    resumed = coordinator.run_cycle()
    assert resumed.zone_rules is not None
    assert resumed.zone_rules.agrees
    assert resumed.summary.admitted == 1
