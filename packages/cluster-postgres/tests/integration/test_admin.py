"""ScheduleAdmin against real PostgreSQL, connected as ql3_admin."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from pydantic import ValidationError
from ql3_cluster_postgres import (
    DuplicateScheduleError,
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleNotFoundError,
    ScheduleSpec,
    ScheduleStateError,
)
from ql3_runtime_core import (
    CommitStatus,
    InvalidCronError,
    MisfirePolicy,
    ScheduleDefinition,
    ScheduleState,
    next_occurrence_ms,
)
from repo_helpers import command, db_now_ms, decide, fetch, make_schedules

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

HOURLY = ScheduleDefinition(cron="0 * * * *")


@pytest.fixture
def admin(ql3_db: Ql3Database) -> Iterator[ScheduleAdmin]:
    """Open a ScheduleAdmin connected as ql3_admin."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as opened:
        yield opened


def test_add_creates_task_trigger_and_schedule_with_first_cursor(
    admin: ScheduleAdmin, ql3_db: Ql3Database
) -> None:
    """add_schedule writes one task, trigger and schedule; the cursor follows the DB's now."""
    before = admin.database_now_ms()
    record = admin.add_schedule("hourly", HOURLY, payload_template={"k": 1})
    after = admin.database_now_ms()
    assert record.name == "hourly"
    assert record.state is ScheduleState.ACTIVE
    assert record.definition == HOURLY
    assert before <= record.created_at_ms == record.updated_at_ms <= after
    assert record.next_due_at_ms in {
        next_occurrence_ms("0 * * * *", "UTC", t) for t in (before, after)
    }
    assert record.next_due_at_ms is not None
    assert record.next_due_at_ms > before
    assert (record.claim_owner_id, record.claim_expires_at_ms, record.version) == (None, None, 0)
    rows = fetch(
        ql3_db.dsn("admin"),
        "SELECT t.name, t.payload_template, g.kind, g.enabled FROM ql3.tasks t"
        " JOIN ql3.triggers g ON g.task_id = t.id",
    )
    assert rows == [("hourly", {"k": 1}, "cron", True)]


def test_add_respects_start_and_end_window(admin: ScheduleAdmin) -> None:
    """The first cursor is strictly after max(now, start-1); past the end it is exhausted."""
    now = admin.database_now_ms()
    start = now + 7_200_000
    later = admin.add_schedule(
        "later", ScheduleDefinition(cron="0 * * * *", start_at_ms=start - start % 3_600_000)
    )
    assert later.next_due_at_ms == start - start % 3_600_000
    ended = admin.add_schedule(
        "ended", ScheduleDefinition(cron="0 0 1 1 *", start_at_ms=0, end_at_ms=now - 1)
    )
    assert ended.state is ScheduleState.EXHAUSTED
    assert ended.next_due_at_ms is None


def test_add_refuses_duplicates_and_bad_definitions(
    admin: ScheduleAdmin, ql3_db: Ql3Database
) -> None:
    """A taken name raises DuplicateScheduleError naming it; a bad cron writes nothing."""
    admin.add_schedule("dup", HOURLY)
    with pytest.raises(DuplicateScheduleError, match="'dup'"):
        admin.add_schedule("dup", HOURLY)
    with pytest.raises(InvalidCronError):
        admin.add_schedule("bad", ScheduleDefinition.model_construct(cron="61 * * * *"))
    with pytest.raises(ValidationError):
        admin.add_schedule("", HOURLY)
    assert [r.name for r in admin.list_schedules()] == ["dup"]
    assert fetch(ql3_db.dsn("admin"), "SELECT count(*) FROM ql3.tasks") == [(1,)]


def test_apply_is_idempotent_updates_and_prunes(admin: ScheduleAdmin) -> None:
    """Apply creates, leaves equal definitions alone, updates changes and prunes the rest."""
    specs = [ScheduleSpec(name=f"job{i}", definition=HOURLY) for i in range(3)]
    first = admin.apply_schedules(specs)
    assert first.created == ("job0", "job1", "job2")
    again = admin.apply_schedules(specs)
    assert (again.created, again.updated, again.unchanged) == ((), (), ("job0", "job1", "job2"))
    before = {r.name: r for r in admin.list_schedules()}
    daily = ScheduleDefinition(cron="0 0 * * *")
    grace = HOURLY.model_copy(update={"misfire_grace_ms": 5})
    changed = [
        ScheduleSpec(name="job0", definition=daily),
        ScheduleSpec(name="job1", definition=grace),
    ]
    now_before = admin.database_now_ms()
    report = admin.apply_schedules(changed, prune=True)
    now_after = admin.database_now_ms()
    assert (report.updated, report.retired, report.created) == (("job0", "job1"), ("job2",), ())
    after = {r.name: r for r in admin.list_schedules()}
    assert after["job0"].definition == daily
    assert after["job0"].next_due_at_ms in {
        next_occurrence_ms("0 0 * * *", "UTC", now) for now in (now_before, now_after)
    }
    assert after["job1"].next_due_at_ms == before["job1"].next_due_at_ms
    assert after["job1"].definition == grace
    assert all(after[n].version == before[n].version + 1 for n in after)
    assert after["job2"].state is ScheduleState.RETIRED
    back = admin.apply_schedules([*changed, ScheduleSpec(name="job2", definition=HOURLY)])
    assert back.updated == ("job2",)
    assert admin.get_schedule("job2").state is ScheduleState.ACTIVE


def test_apply_refuses_repeated_names(admin: ScheduleAdmin) -> None:
    """Two specs with one name are refused before anything is written."""
    spec = ScheduleSpec(name="twice", definition=HOURLY)
    with pytest.raises(ValueError, match="twice"):
        admin.apply_schedules([spec, spec])
    assert admin.list_schedules() == []


def test_apply_ten_thousand_schedules_in_one_transaction(admin: ScheduleAdmin) -> None:
    """10 000 specs apply in one transaction and re-apply as all unchanged."""
    specs = [
        ScheduleSpec(name=f"bulk{i:05d}", definition=ScheduleDefinition(cron=f"{i % 60} * * * *"))
        for i in range(10_000)
    ]
    assert len(admin.apply_schedules(specs).created) == 10_000
    assert len(admin.apply_schedules(specs).unchanged) == 10_000
    assert len(admin.list_schedules()) == 10_000


def test_pause_resume_retire(admin: ScheduleAdmin, ql3_db: Ql3Database) -> None:
    """State changes bump the version, keep the cursor, are idempotent and name the schedule."""
    created = admin.add_schedule("life", HOURLY)
    paused = admin.pause("life")
    assert (paused.state, paused.version) == (ScheduleState.PAUSED, created.version + 1)
    assert paused.next_due_at_ms == created.next_due_at_ms
    assert admin.pause("life").version == paused.version
    resumed = admin.resume("life")
    assert (resumed.state, resumed.version) == (ScheduleState.ACTIVE, paused.version + 1)
    retired = admin.retire("life")
    assert retired.state is ScheduleState.RETIRED
    with pytest.raises(ScheduleStateError, match="'life'"):
        admin.resume("life")
    with pytest.raises(ScheduleNotFoundError, match="'ghost'"):
        admin.pause("ghost")
    with pytest.raises(ScheduleNotFoundError, match="'ghost'"):
        admin.get_schedule("ghost")
    assert fetch(ql3_db.dsn("admin"), "SELECT count(*) FROM ql3.tasks") == [(1,)]


def test_admin_change_makes_a_held_claim_race(ql3_db: Ql3Database) -> None:
    """Pausing a claimed schedule leaves the claim columns alone but its commit races."""
    make_schedules(ql3_db, 1)
    with (
        PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo,
        ScheduleAdmin(ql3_db.dsn("admin")) as admin,
    ):
        (claim,) = repo.claim_due_schedules(command(), 1)
        (record,) = admin.list_schedules()
        paused = admin.pause(record.name)
        assert paused.claim_owner_id == claim.owner_id
        assert paused.claim_expires_at_ms == claim.claim_expires_at_ms
        assert paused.updated_at_ms == claim.claim_acquired_at_ms
        assert repo.commit_decisions([decide(claim)]).outcomes[0].status is CommitStatus.RACED
        admin.resume(record.name)
        assert repo.claim_due_schedules(command("b"), 1) == []


def test_changes_wake_listeners(ql3_db: Ql3Database) -> None:
    """Every admin change notifies ql3_schedule_changed inside its transaction."""
    with (
        PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo,
        ScheduleAdmin(ql3_db.dsn("admin")) as admin,
    ):
        assert repo.wait_for_wakeup(0.01) is False
        admin.add_schedule("wake", HOURLY)
        assert repo.wait_for_wakeup(5.0) is True
        admin.pause("wake")
        assert repo.wait_for_wakeup(5.0) is True
        admin.apply_schedules([ScheduleSpec(name="wake", definition=HOURLY)])
        assert repo.wait_for_wakeup(0.05) is False  # unchanged: no notification


def test_status_reports_claims_runs_and_due_by_database_clock(ql3_db: Ql3Database) -> None:
    """Status shows DB now, who holds which claim and for how long, runs admitted, next due."""
    make_schedules(ql3_db, 2, policy=MisfirePolicy.FIRE_ONCE)
    with (
        PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo,
        ScheduleAdmin(ql3_db.dsn("admin")) as admin,
    ):
        first, second = repo.claim_due_schedules(command("holder", lease_ms=20_000), 2)
        committed = decide(first)
        repo.commit_decisions([committed])
        before = db_now_ms(ql3_db.dsn("admin"))
        report = admin.status()
    assert report.database_now_ms >= before
    by_id = {s.schedule_id: s for s in report.schedules}
    held = by_id[second.schedule_id]
    assert held.claim_owner_id == "holder"
    assert held.claim_expires_in_ms is not None
    assert 0 < held.claim_expires_in_ms <= 20_000
    assert report.claims_held == 1
    assert by_id[first.schedule_id].runs_admitted == len(committed.decision.occurrences) > 0
    assert by_id[first.schedule_id].claim_owner_id is None
    assert report.next_due_in_ms is not None


def test_admin_cannot_write_claim_columns(ql3_db: Ql3Database) -> None:
    """The admin role is refused an UPDATE of the claim columns (least privilege, DESIGN §11)."""
    make_schedules(ql3_db, 1)
    with (
        psycopg.connect(ql3_db.dsn("admin"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("UPDATE ql3.trigger_schedules SET claim_owner_id = 'x'")
