"""One unreadable row must not stop the cluster (DESIGN §8), against real PostgreSQL.

Rows are planted by SQL as the superuser, past every application check: first the CHECKs of
schema 3 must refuse what they can, then a row that passes them but that no replica can read
must be quarantined by the claim (state `invalid`, reason, claim released) while every other due
schedule is claimed as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    ScheduleStateError,
)
from ql3_runtime_core import ScheduleDefinition, ScheduleState
from repo_helpers import command, decide, fetch, make_schedules
from verify_compare import checked_verify

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

# Pass the schema's CHECKs, yet no replica can read them: a minute out of range, a zone that
# no zone rules know.
BAD_CRON = "61 * * * *"
BAD_ZONE = "Mars/Olympus"
_ROW = (
    "SELECT state, invalid_reason, invalidated_at_ms, claim_owner_id, claim_token,"
    " claim_expires_at_ms, version, updated_at_ms, next_due_at_ms"
    " FROM ql3.trigger_schedules WHERE id = %s"
)


def _plant(db: Ql3Database, schedule_id: int, **columns: Any) -> None:
    """Overwrite columns of a schedule row as the superuser (no application check)."""
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(name), sql.Placeholder(name)) for name in columns
    )
    statement = sql.SQL("UPDATE ql3.trigger_schedules SET {} WHERE id = {}").format(
        assignments, sql.Placeholder("id")
    )
    with psycopg.connect(db.superuser_dsn, autocommit=True) as conn:
        conn.execute(statement, {**columns, "id": schedule_id})


def _row(db: Ql3Database, schedule_id: int) -> tuple[Any, ...]:
    return fetch(db.superuser_dsn, _ROW, (schedule_id,))[0]


@pytest.mark.parametrize(
    ("column", "value", "constraint"),
    [
        ("cron", "every tuesday", "trigger_schedules_cron_shape"),
        ("cron", "0 9  * * *", "trigger_schedules_cron_shape"),
        ("cron", "0\t9 * * *", "trigger_schedules_cron_shape"),
        ("cron", "0 9 * * * * *", "trigger_schedules_cron_shape"),
        ("cron", "0 9 * * 1; DROP", "trigger_schedules_cron_shape"),
        ("cron", "0," * 500 + "0 * * * *", "trigger_schedules_cron_shape"),
        ("cron", "", "trigger_schedules_cron_shape"),
        ("timezone", "localtime", "trigger_schedules_timezone_shape"),
        ("timezone", "LocalTime", "trigger_schedules_timezone_shape"),
        ("timezone", "", "trigger_schedules_timezone_shape"),
        ("timezone", "/etc/localtime", "trigger_schedules_timezone_shape"),
        ("timezone", "Europe/../../etc/passwd", "trigger_schedules_timezone_shape"),
        ("timezone", "Europe/Berlin ", "trigger_schedules_timezone_shape"),
        ("timezone", "A" * 65, "trigger_schedules_timezone_shape"),
        ("misfire_grace_ms", 604_800_001, "trigger_schedules_grace_bound"),
        ("claim_owner_id", "x" * 201, "trigger_schedules_owner_length"),
        ("version", -1, "trigger_schedules_version_positive"),
        ("state", "invalid", "trigger_schedules_invalid_reason"),
        ("invalid_reason", "on an active row", "trigger_schedules_invalid_reason"),
    ],
)
def test_database_refuses_what_a_check_can_refuse(
    ql3_db: Ql3Database, column: str, value: object, constraint: str
) -> None:
    """A definition or quarantine column written past the application is refused by its CHECK."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    if column == "claim_owner_id":
        # The owner id is only ever written with a whole claim (claim_all_or_none).
        extra: dict[str, Any] = {
            "claim_token": "11111111-2222-3333-4444-555555555555",
            "claim_expires_at_ms": fetch(
                ql3_db.superuser_dsn,
                "SELECT updated_at_ms + 1000 FROM ql3.trigger_schedules WHERE id = %s",
                (schedule_id,),
            )[0][0],
        }
    else:
        extra = {}
    with pytest.raises(pg_errors.CheckViolation, match=constraint):
        _plant(ql3_db, schedule_id, **{column: value}, **extra)
    assert _row(ql3_db, schedule_id)[0] == "active"


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("cron", "0 9 * * 1#2"),
        ("cron", "0 0 L * *"),
        ("cron", "0 9 15W * *"),
        ("cron", "0 0 ? * *"),
        ("cron", "0 9 * jan-mar mon,WED"),
        ("cron", "*/5 0-30/2 * * * *"),
        ("cron", "@daily"),
        ("cron", ",".join(str(minute) for minute in range(60)) + " * * * *"),
        ("timezone", "America/Argentina/ComodRivadavia"),
        ("timezone", "Etc/GMT+5"),
        ("timezone", "America/Port-au-Prince"),
        ("timezone", "UTC"),
        ("misfire_grace_ms", 604_800_000),
        ("misfire_grace_ms", 0),
    ],
)
def test_checks_accept_what_earlier_builds_wrote(
    ql3_db: Ql3Database, column: str, value: object
) -> None:
    """Values the application accepted before schema 3 still pass every CHECK."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    _plant(ql3_db, schedule_id, **{column: value})
    statement = sql.SQL("SELECT {} FROM ql3.trigger_schedules WHERE id = %s").format(
        sql.Identifier(column)
    )
    with psycopg.connect(ql3_db.superuser_dsn) as conn:
        assert conn.execute(statement, (schedule_id,)).fetchall() == [(value,)]


def test_unreadable_rows_are_quarantined_and_the_rest_is_claimed(ql3_db: Ql3Database) -> None:
    """The claim quarantines rows it cannot read (claim released, reason kept), claims the rest."""
    ids = make_schedules(ql3_db, 5)
    bad_cron, bad_zone = ids[1], ids[3]
    _plant(ql3_db, bad_cron, cron=BAD_CRON)
    _plant(ql3_db, bad_zone, timezone=BAD_ZONE)
    before = {sid: _row(ql3_db, sid) for sid in ids}
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claim_round = repo.claim_round(command(), 16)
        again = repo.claim_round(command("owner-b"), 16)
    assert claim_round.zone_rules.agrees
    assert sorted(claim.schedule_id for claim in claim_round.claims) == [ids[0], ids[2], ids[4]]
    quarantined = {item.schedule_id: item for item in claim_round.quarantined}
    assert sorted(quarantined) == [bad_cron, bad_zone]
    assert BAD_CRON in quarantined[bad_cron].reason
    assert BAD_ZONE in quarantined[bad_zone].reason
    acquired = claim_round.claims[0].claim_acquired_at_ms
    for sid, item in quarantined.items():
        state, reason, at, owner, token, expires, version, updated, due = _row(ql3_db, sid)
        assert (state, reason, at) == ("invalid", item.reason, item.quarantined_at_ms)
        assert (owner, token, expires) == (None, None, None)
        # Claimed (+1), then quarantined (+1) at the quarantine statement's own database time.
        assert version == before[sid][6] + 2
        assert updated == at >= acquired
        assert due == before[sid][8]
    # Quarantined rows are never claimed again; the healthy ones are held by the first round.
    assert again.claims == ()
    assert again.quarantined == ()


def test_quarantine_is_fenced_on_the_exact_claim(ql3_db: Ql3Database) -> None:
    """A decision failure quarantines the claimed row, but never one whose claim moved on."""
    first, second = make_schedules(ql3_db, 2)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claims = {claim.schedule_id: claim for claim in repo.claim_round(command(), 16).claims}
        with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
            name = admin.list_schedules()[1].name
            admin.pause(name)  # bumps the version: the claim on `second` no longer stands
        done = repo.quarantine_claims(
            [(claims[first], "decision failed: boom"), (claims[second], "decision failed: boom")]
        )
    assert [item.schedule_id for item in done] == [first]
    assert _row(ql3_db, first)[:2] == ("invalid", "decision failed: boom")
    assert _row(ql3_db, second)[0] == "paused"


def test_a_commit_of_a_quarantined_claim_races(ql3_db: Ql3Database) -> None:
    """Once quarantined, the claim it held is gone: committing that claim writes nothing."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_round(command(), 16).claims
        repo.quarantine_claims([(claim, "decision failed: boom")])
        (outcome,) = repo.commit_decisions([decide(claim)]).outcomes
    assert outcome.status.value == "raced"
    assert fetch(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.runs") == [(0,)]
    assert _row(ql3_db, schedule_id)[0] == "invalid"


def test_cluster_state_counts_quarantined_schedules(ql3_db: Ql3Database) -> None:
    """The service's periodic read reports the recorded zone rules and the invalid count."""
    ids = make_schedules(ql3_db, 3)
    _plant(ql3_db, ids[0], cron=BAD_CRON)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert repo.read_cluster_state().invalid_schedules == 0
        repo.claim_round(command(), 16)
        state = repo.read_cluster_state()
    assert state.invalid_schedules == 1
    assert state.zone_rules.agrees


def test_admin_lists_and_reports_quarantined_schedules(ql3_db: Ql3Database) -> None:
    """list, get and status show the invalid state with its reason; the raw text stays visible."""
    ids = make_schedules(ql3_db, 2)
    _plant(ql3_db, ids[0], timezone=BAD_ZONE)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        repo.claim_round(command(), 16)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        records = {record.schedule_id: record for record in admin.list_schedules()}
        status = admin.status()
    bad = records[ids[0]]
    assert bad.state is ScheduleState.INVALID
    assert bad.definition is None
    assert bad.timezone == BAD_ZONE
    assert bad.definition_error is not None
    assert BAD_ZONE in bad.definition_error
    assert bad.invalid_reason is not None
    assert BAD_ZONE in bad.invalid_reason
    assert records[ids[1]].invalid_reason is None
    assert status.invalid_schedules == 1
    listed = {item.schedule_id: item for item in status.schedules}
    assert listed[ids[0]].invalid_reason == bad.invalid_reason
    assert listed[ids[0]].invalidated_at_ms == bad.invalidated_at_ms
    assert listed[ids[0]].next_due_in_ms is None


def test_a_corrected_definition_brings_a_quarantined_schedule_back(ql3_db: Ql3Database) -> None:
    """Resume refuses while the stored definition is unreadable; applying a fixed one revives."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    _plant(ql3_db, schedule_id, cron=BAD_CRON)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        repo.claim_round(command(), 16)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        (record,) = admin.list_schedules()
        with pytest.raises(ScheduleStateError, match="cannot be read"):
            admin.resume(record.name)
        fixed = ScheduleDefinition(cron="*/2 * * * * *")
        report = admin.apply_schedules([ScheduleSpec(name=record.name, definition=fixed)])
        back = admin.get_schedule(record.name)
    assert report.updated == (record.name,)
    assert back.state is ScheduleState.ACTIVE
    assert back.definition == fixed
    assert (back.invalid_reason, back.invalidated_at_ms) == (None, None)
    assert back.next_due_at_ms is not None
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert repo.read_cluster_state().invalid_schedules == 0


def test_resume_brings_back_a_readable_quarantined_schedule_with_its_cursor(
    ql3_db: Ql3Database,
) -> None:
    """A schedule quarantined by a decision failure resumes from its kept cursor, like a pause."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_round(command(), 16).claims
        repo.quarantine_claims([(claim, "decision failed: boom")])
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        (record,) = admin.list_schedules()
        with pytest.raises(ScheduleStateError, match="pause a schedule in state 'invalid'"):
            admin.pause(record.name)
        resumed = admin.resume(record.name)
    assert resumed.state is ScheduleState.ACTIVE
    assert resumed.next_due_at_ms == claim.next_due_at_ms
    assert resumed.invalid_reason is None
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert [c.schedule_id for c in repo.claim_round(command(), 16).claims] == [schedule_id]


def test_retiring_a_quarantined_schedule_keeps_its_stored_definition(ql3_db: Ql3Database) -> None:
    """Retire works on an unreadable invalid row and leaves its stored text untouched."""
    (schedule_id,) = make_schedules(ql3_db, 1)
    _plant(ql3_db, schedule_id, timezone=BAD_ZONE)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        repo.claim_round(command(), 16)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        (record,) = admin.list_schedules()
        retired = admin.retire(record.name)
    assert retired.state is ScheduleState.RETIRED
    assert (retired.timezone, retired.invalid_reason) == (BAD_ZONE, None)
    assert checked_verify(ql3_db.dsn("admin")).ok


def test_verify_reports_each_invalid_schedule(ql3_db: Ql3Database) -> None:
    """Verify fails with one invalid_schedule finding per unreadable or quarantined schedule."""
    ids = make_schedules(ql3_db, 3)
    _plant(ql3_db, ids[0], cron=BAD_CRON)
    unread = checked_verify(ql3_db.dsn("admin"))
    assert [(v.rule, v.schedule_id) for v in unread.violations] == [("invalid_schedule", ids[0])]
    assert "cannot be read" in unread.violations[0].detail
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claim_round = repo.claim_round(command(), 16)
        repo.commit_decisions([decide(claim) for claim in claim_round.claims])
    report = checked_verify(ql3_db.dsn("admin"))
    assert not report.ok
    assert [(v.rule, v.schedule_id) for v in report.violations] == [("invalid_schedule", ids[0])]
    assert "quarantined" in report.violations[0].detail
    assert BAD_CRON in report.violations[0].detail
    assert report.schedules == 3
    assert report.runs > 0


def test_a_failed_quarantine_still_hands_over_the_readable_claims(ql3_db: Ql3Database) -> None:
    """The quarantine statement failing must not cost the round its good claims.

    The runtime role loses its grant on the quarantine columns, so the claim's own quarantine
    of an unreadable row fails. The readable claims of the same round come back anyway and
    commit at once; the unreadable row keeps its claim until it expires by the database clock.
    """
    ids = make_schedules(ql3_db, 3)
    bad = ids[1]
    _plant(ql3_db, bad, cron=BAD_CRON)
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        conn.execute(
            "REVOKE UPDATE (invalid_reason, invalidated_at_ms) ON ql3.trigger_schedules"
            " FROM ql3_runtime"
        )
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claim_round = repo.claim_round(command(), 16)
        assert sorted(claim.schedule_id for claim in claim_round.claims) == [ids[0], ids[2]]
        assert claim_round.quarantined == ()
        batch = repo.commit_decisions([decide(claim) for claim in claim_round.claims])
    assert {outcome.schedule_id for outcome in batch.outcomes if outcome.runs} == {ids[0], ids[2]}
    rows = fetch(ql3_db.superuser_dsn, "SELECT id, claim_token FROM ql3.trigger_schedules")
    tokens: dict[Any, Any] = dict(rows)
    assert tokens[ids[0]] is None
    assert tokens[ids[2]] is None
    assert tokens[bad] is not None  # left to expire; the next claim quarantines it
    assert _row(ql3_db, bad)[0] == "active"
