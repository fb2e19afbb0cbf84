"""Coordinator cycles meeting unreadable and undecidable schedules, real PostgreSQL (DESIGN §8)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from fix_db import db_now_ms, sql_rows, wait_for
from history import add_schedules, plant_schedule
from ql3_cluster_control import Coordinator, CoordinatorMetrics
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClaimRound,
    MisfirePolicy,
    QL3Error,
    ScheduleDefinition,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


class UndecidablePostgres(PostgresScheduleRepository):
    """The real repository, handing the Coordinator one claim whose decision must raise."""

    def __init__(self, *args: Any, undecidable: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.undecidable = undecidable

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim, then give the chosen claim a definition no decision can evaluate."""
        broken = ScheduleDefinition.model_construct(
            cron="61 * * * *",
            timezone="UTC",
            misfire_policy=MisfirePolicy.FIRE_ONCE,
            misfire_grace_ms=60_000,
            start_at_ms=None,
            end_at_ms=None,
        )
        claim_round = super().claim_round(command, limit)
        claims = tuple(
            claim.model_copy(update={"definition": broken})
            if claim.schedule_id == self.undecidable
            else claim
            for claim in claim_round.claims
        )
        return claim_round.model_copy(update={"claims": claims})


def _state(db: Ql3Database, schedule_id: int) -> tuple[Any, ...]:
    return sql_rows(
        db.superuser_dsn,
        "SELECT state, invalid_reason, claim_token FROM ql3.trigger_schedules WHERE id = %s",
        [schedule_id],
    )[0]


def _wait_due(db: Ql3Database, first: dict[int, int]) -> None:
    latest = max(first.values())
    wait_for(lambda: db_now_ms(db.superuser_dsn) >= latest, timeout_s=5, what="schedules due")


def test_a_cycle_quarantines_unreadable_rows_and_admits_the_others(ql3_db: Ql3Database) -> None:
    """One cycle: planted rows end invalid with their reason, each healthy schedule admits."""
    first = add_schedules(ql3_db.dsn("admin"), 3)
    bad_cron = plant_schedule(ql3_db.superuser_dsn, "bad-cron", cron="61 * * * *")
    bad_zone = plant_schedule(ql3_db.superuser_dsn, "bad-zone", cron="* * * * *", timezone="X/Y")
    _wait_due(ql3_db, first)
    metrics = CoordinatorMetrics()
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        result = Coordinator(repo, owner_id="a", metrics=metrics).run_cycle()
    assert sorted(item.schedule_id for item in result.quarantined) == sorted([bad_cron, bad_zone])
    assert {run.schedule_id for run in result.admitted} == set(first)
    assert metrics.registry.get_sample_value("ql3_schedules_quarantined_total") == 2
    state, reason, token = _state(ql3_db, bad_zone)
    assert (state, token) == ("invalid", None)
    assert "X/Y" in reason


def test_an_undecidable_claim_is_quarantined_and_the_batch_commits(ql3_db: Ql3Database) -> None:
    """A decision raising for one claim quarantines it; the others commit in the same round."""
    first = add_schedules(ql3_db.dsn("admin"), 3)
    _wait_due(ql3_db, first)
    victim = min(first)
    with UndecidablePostgres(ql3_db.dsn("runtime"), undecidable=victim) as repo:
        result = Coordinator(repo, owner_id="a").run_cycle()
    (item,) = result.quarantined
    assert item.schedule_id == victim
    assert item.reason.startswith("decision failed: InvalidCronError: ")
    assert {run.schedule_id for run in result.admitted} == set(first) - {victim}
    assert _state(ql3_db, victim) == ("invalid", item.reason, None)


def test_a_failed_quarantine_does_not_hold_back_the_rounds_admissions(
    ql3_db: Ql3Database,
) -> None:
    """The decisions of a round commit before its quarantine; a failed quarantine costs nothing.

    The runtime role loses its grant on the quarantine columns, so quarantining the undecidable
    claim fails and the cycle ends with that error. The round's other schedules are admitted
    all the same, and the undecidable claim is released by the next cycle, not left for its
    lease.
    """
    first = add_schedules(ql3_db.dsn("admin"), 3)
    _wait_due(ql3_db, first)
    victim = min(first)
    sql_rows(
        ql3_db.superuser_dsn,
        "REVOKE UPDATE (invalid_reason, invalidated_at_ms) ON ql3.trigger_schedules"
        " FROM ql3_runtime",
    )
    with UndecidablePostgres(ql3_db.dsn("runtime"), undecidable=victim) as repo:
        coordinator = Coordinator(repo, owner_id="a")
        with pytest.raises(QL3Error, match="quarantine"):
            coordinator.run_cycle()
        admitted = sql_rows(ql3_db.superuser_dsn, "SELECT DISTINCT schedule_id FROM ql3.runs")
        assert {row[0] for row in admitted} == set(first) - {victim}
        assert [claim.schedule_id for claim in coordinator.held_claims] == [victim]
        assert coordinator.release_held_claims() == 1
    assert _state(ql3_db, victim) == ("active", None, None)
