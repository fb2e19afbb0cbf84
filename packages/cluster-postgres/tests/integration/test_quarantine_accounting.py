"""Quarantine (DESIGN §8) meets occurrence accounting (DESIGN §7), against real PostgreSQL.

A quarantined schedule is judged by `invalid_schedule` alone; bringing it back (a corrected
definition, or resume) opens a schedule revision and never leaves its cursor at or before an
occurrence already admitted or skipped, so `ql3 verify` accounts for it again from there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
)
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, ScheduleState
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    make_schedules,
    owner_conn,
    plant_run,
    wait_until,
)
from verify_compare import checked_verify

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

# Passes the schema's CHECKs, yet no replica can read it (a minute out of range).
BAD_CRON = "61 * * * *"
_REVISIONS = (
    "SELECT revision, reason, first_cursor_ms, end_cursor_ms, placed_after_ms,"
    " ended_at_ms IS NULL FROM ql3.schedule_revisions WHERE schedule_id = %s ORDER BY revision"
)


def _revisions(db: Ql3Database, schedule_id: int) -> list[tuple[Any, ...]]:
    return fetch(db.dsn("admin"), _REVISIONS, (schedule_id,))


def _cursor(db: Ql3Database, schedule_id: int) -> int:
    ((cursor,),) = fetch(
        db.dsn("admin"),
        "SELECT next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s",
        (schedule_id,),
    )
    return int(cursor)


def _skip_records(db: Ql3Database, schedule_id: int) -> int:
    ((count,),) = fetch(
        db.dsn("admin"),
        "SELECT count(*) FROM ql3.skipped_occurrences WHERE schedule_id = %s",
        (schedule_id,),
    )
    return int(count)


def _claim_and_commit(repo: PostgresScheduleRepository, db: Ql3Database, schedule_id: int) -> None:
    """Wait until the schedule is due by the database, then claim and commit it as a replica."""
    cursor = _cursor(db, schedule_id)
    wait_until(lambda: db_now_ms(db.dsn("runtime")) >= cursor, what="the cursor is due")
    claims = [c for c in repo.claim_round(command(), 16).claims if c.schedule_id == schedule_id]
    assert len(claims) == 1
    (outcome,) = repo.commit_decisions([decide(claims[0])]).outcomes
    assert outcome.status.value == "committed"


def _quarantine_on_claim(repo: PostgresScheduleRepository, db: Ql3Database, sid: int) -> None:
    """Claim the due schedule and quarantine it as a replica whose decision failed."""
    cursor = _cursor(db, sid)
    wait_until(lambda: db_now_ms(db.dsn("runtime")) >= cursor, what="the cursor is due")
    (claim,) = [c for c in repo.claim_round(command(), 16).claims if c.schedule_id == sid]
    assert [q.schedule_id for q in repo.quarantine_claims([(claim, "decision failed: boom")])] == [
        sid
    ]


def test_a_fix_applied_to_a_quarantined_schedule_opens_a_revision_after_every_decided_occurrence(
    ql3_db: Ql3Database,
) -> None:
    """A corrected definition replaces the unreadable one with a cursor after a later run."""
    (sid,) = make_schedules(ql3_db, 1)
    now = db_now_ms(ql3_db.dsn("admin"))
    future = now - now % 1_000 + 600_000
    with owner_conn(ql3_db) as owner:
        # A run later than the database clock (say, admitted before the clock stepped back).
        plant_run(owner, sid, future, "stepped")
        owner.execute("UPDATE ql3.trigger_schedules SET cron = %s WHERE id = %s", (BAD_CRON, sid))
    kept = _cursor(ql3_db, sid)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert [q.schedule_id for q in repo.claim_round(command(), 16).quarantined] == [sid]
    fixed = ScheduleDefinition(cron="*/1 * * * * *", misfire_policy=MisfirePolicy.CATCH_UP)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.apply_schedules([ScheduleSpec(name="s00000", definition=fixed)])
        back = admin.get_schedule("s00000")
    assert back.state is ScheduleState.ACTIVE
    assert back.next_due_at_ms is not None
    assert back.next_due_at_ms == future + 1_000
    (created, replaced) = _revisions(ql3_db, sid)
    assert created[:2] == (1, "created")
    assert created[3] == kept  # the quarantined revision ends at the cursor it kept
    assert created[5] is False
    assert replaced[:3] == (2, "replaced", future + 1_000)
    assert replaced[4] is not None
    assert replaced[5] is True


def test_a_resumed_schedule_accounts_for_what_its_quarantine_missed(ql3_db: Ql3Database) -> None:
    """Quarantined, verify judges it by invalid_schedule alone; resumed, its skips verify clean."""
    (sid,) = make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=500)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        _claim_and_commit(repo, ql3_db, sid)  # three occurrences 1-3 s late: one skip record
        assert _skip_records(ql3_db, sid) == 1
        _quarantine_on_claim(repo, ql3_db, sid)
        kept = _cursor(ql3_db, sid)
        wait_until(
            lambda: db_now_ms(ql3_db.dsn("runtime")) >= kept + 2_500,
            what="the quarantine misses occurrences",
        )
        quarantined = checked_verify(ql3_db.dsn("admin"))
        # Its runs, skip record and revision are not judged while it is quarantined.
        assert [(v.rule, v.schedule_id) for v in quarantined.violations] == [
            ("invalid_schedule", sid)
        ]
        with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
            resumed = admin.resume("s00000")
        assert (resumed.state, resumed.next_due_at_ms) == (ScheduleState.ACTIVE, kept)
        created, redefined = _revisions(ql3_db, sid)
        # The live revision ends at the kept cursor and the next one starts there.
        assert (created[:2], created[3]) == ((1, "created"), kept)
        assert redefined[:4] == (2, "redefined", kept, None)
        _claim_and_commit(repo, ql3_db, sid)  # the missed occurrences: a second skip record
    assert _skip_records(ql3_db, sid) == 2
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    (verdict,) = report.per_schedule
    assert verdict.skipped >= 5
    assert verdict.missing == 0


def test_resume_places_a_cursor_anew_when_the_kept_one_was_already_decided(
    ql3_db: Ql3Database,
) -> None:
    """A quarantined row whose cursor was written back onto a run resumes after that run."""
    (sid,) = make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        _claim_and_commit(repo, ql3_db, sid)
        _quarantine_on_claim(repo, ql3_db, sid)
    ((latest,),) = fetch(
        ql3_db.dsn("admin"),
        "SELECT max(scheduled_for_ms) FROM ql3.runs WHERE schedule_id = %s",
        (sid,),
    )
    with owner_conn(ql3_db) as owner:
        owner.execute(
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = %s WHERE id = %s", (latest, sid)
        )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        resumed = admin.resume("s00000")
    assert resumed.state is ScheduleState.ACTIVE
    assert resumed.next_due_at_ms is not None
    assert resumed.next_due_at_ms > latest
    assert [row[:2] for row in _revisions(ql3_db, sid)] == [(1, "created"), (2, "replaced")]
    assert _revisions(ql3_db, sid)[1][2] == resumed.next_due_at_ms


def test_status_tells_a_quarantined_schedule_from_an_overdue_one(ql3_db: Ql3Database) -> None:
    """Both far behind the clock: the active one is overdue, the quarantined one only invalid."""
    active, quarantined = make_schedules(ql3_db, 2)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        _quarantine_on_claim(repo, ql3_db, quarantined)
        now = db_now_ms(ql3_db.dsn("runtime"))
        with owner_conn(ql3_db) as owner:
            owner.execute(
                "UPDATE ql3.trigger_schedules SET next_due_at_ms = %s WHERE id = ANY(%s)",
                (now - now % 1_000 - 600_000, [active, quarantined]),
            )
        assert repo.count_overdue_schedules(1_000) == 1
        assert repo.read_cluster_state().invalid_schedules == 1
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        status = admin.status(lease_ms=1_000)
    by_id = {item.schedule_id: item for item in status.schedules}
    assert (status.invalid_schedules, status.schedules_overdue) == (1, 1)
    assert by_id[active].overdue
    assert by_id[active].invalid_reason is None
    assert not by_id[quarantined].overdue
    assert by_id[quarantined].invalid_reason == "decision failed: boom"


def test_a_quarantined_claim_never_writes_a_skip_record(ql3_db: Ql3Database) -> None:
    """The quarantine moves the claim on, so a commit that would skip occurrences writes nothing."""
    (sid,) = make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=0)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_round(command(), 16).claims
        commit = decide(claim)
        assert commit.decision.skipped > 0
        repo.quarantine_claims([(claim, "decision failed: boom")])
        (outcome,) = repo.commit_decisions([commit]).outcomes
    assert outcome.status.value == "raced"
    assert _skip_records(ql3_db, sid) == 0
    assert fetch(ql3_db.dsn("admin"), "SELECT count(*) FROM ql3.runs") == [(0,)]
