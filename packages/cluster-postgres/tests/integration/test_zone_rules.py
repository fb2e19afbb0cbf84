"""The database is the zone authority, against real PostgreSQL.

The database records one zone rules version and stores the rule data of every version it records.
A replica decides with the recorded version loaded from there, never with its node's tzdata: it
follows an adopt at once, and claims nothing only while it cannot load the recorded version (its
data is not stored). Admin placement and `verify_history` compute with the recorded rules too, or
refuse in one line naming both versions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    ZoneRulesUnavailableError,
    adopt_zone_rules,
    load_recorded_zone_rules,
    read_zone_rule_history,
    read_zone_rules,
    record_zone_rules,
    verify_history,
)
from ql3_runtime_core import (
    CommitStatus,
    ScheduleDefinition,
    next_occurrence_ms,
    preview_occurrences,
    wheel_zone_data,
    zone_rules_version,
)
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
from zone_helpers import MADE_UP, NEW_YORK, install_zone_rules, made_up_data, made_up_rules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

OTHER = "1999z"
DAILY = "0 9 * * *"
_CLAIMS = "SELECT id, version, claim_token FROM ql3.trigger_schedules ORDER BY id"
_PLACED = (
    "SELECT placed_after_ms FROM ql3.schedule_revisions WHERE schedule_id = %s"
    " ORDER BY revision DESC LIMIT 1"
)


def _forget_zone_rules(db: Ql3Database) -> None:
    with owner_conn(db) as conn:
        conn.execute("DELETE FROM ql3.zone_rules")


def test_a_migrated_database_records_and_stores_this_nodes_zone_rules(ql3_db: Ql3Database) -> None:
    """Preparing a database (as `ql3 migrate` does) records the node's version and its data."""
    record = read_zone_rules(ql3_db.dsn("admin"))
    assert record is not None
    assert record.version == zone_rules_version()
    assert record.recorded_by == "ql3_login_owner"
    assert record.recorded_at_ms <= db_now_ms(ql3_db.dsn("admin"))
    (entry,) = read_zone_rule_history(ql3_db.dsn("admin"))
    assert (entry.version, entry.took_effect_at_ms, entry.superseded_at_ms) == (
        record.version,
        record.recorded_at_ms,
        None,
    )
    assert entry.zones == len(wheel_zone_data()) > 500


def test_record_writes_only_when_none_is_recorded(ql3_db: Ql3Database) -> None:
    """record_zone_rules never replaces a recorded version; it writes one at database time."""
    kept = record_zone_rules(ql3_db.dsn("owner"), version=OTHER)
    assert (kept.changed, kept.previous, kept.current.version) == (
        False,
        zone_rules_version(),
        zone_rules_version(),
    )
    _forget_zone_rules(ql3_db)
    before = db_now_ms(ql3_db.dsn("owner"))
    written = record_zone_rules(ql3_db.dsn("owner"), version=OTHER)
    after = db_now_ms(ql3_db.dsn("owner"))
    assert (written.changed, written.previous, written.current.version) == (True, None, OTHER)
    assert before <= written.current.recorded_at_ms <= after
    assert read_zone_rules(ql3_db.dsn("admin")) == written.current
    history = read_zone_rule_history(ql3_db.dsn("admin"))
    assert [(row.version, row.superseded_at_ms is None) for row in history] == [
        (zone_rules_version(), False),
        (OTHER, True),
    ]


def test_a_replica_follows_an_adopt_at_once(ql3_db: Ql3Database) -> None:
    """A replica decides with the recorded rules it loaded, and with the new ones after adopt."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        first = repo.claim_round(command(lease_ms=1_000), 16)
        assert first.zone_rules.agrees
        assert first.rules is not None
        assert (first.zone_rules.local_version, first.rules.version) == (MADE_UP, MADE_UP)
        (claim,) = first.claims
        # Decided with this node's wheel, not the recorded rules: the commit writes nothing.
        assert repo.commit_decisions([decide(claim)]).outcomes[0].status is CommitStatus.RACED
        adopt_zone_rules(ql3_db.dsn("admin"))
        wait_until(lambda: bool(_due(ql3_db)), what="the schedule is due again")
        second = repo.claim_round(command(), 16)
    assert second.zone_rules.agrees
    assert second.zone_rules.local_version == zone_rules_version()
    assert second.rules is not None
    assert second.rules.version == zone_rules_version()


def _due(db: Ql3Database) -> list[tuple[object, ...]]:
    return fetch(
        db.dsn("admin"),
        "SELECT id FROM ql3.trigger_schedules WHERE claim_token IS NULL OR claim_expires_at_ms"
        " <= floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
    )


def test_a_replica_without_the_recorded_rules_data_claims_nothing(ql3_db: Ql3Database) -> None:
    """Recorded rules whose data is not stored: no claim, the check names why, then it follows."""
    make_schedules(ql3_db, 2)
    install_zone_rules(ql3_db, OTHER, None)
    before = fetch(ql3_db.superuser_dsn, _CLAIMS)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        refused = repo.claim_round(command("other"), 16)
        state = repo.read_cluster_state()
        assert refused.claims == ()
        assert refused.rules is None
        check = refused.zone_rules
        assert (check.recorded_version, check.local_version, check.agrees) == (OTHER, None, False)
        assert check.problem is not None
        assert f"no rule data for tzdata {OTHER}" in check.problem
        assert not state.zone_rules.agrees
        assert fetch(ql3_db.superuser_dsn, _CLAIMS) == before
        # A node with that version stores its data (`ql3 migrate`): the replica follows at once.
        stored = record_zone_rules(ql3_db.dsn("owner"), version=OTHER, data=wheel_zone_data())
        assert stored.stored_zones == len(wheel_zone_data())
        assert len(repo.claim_round(command("same"), 16).claims) == 2


def test_nothing_is_claimed_while_no_version_is_recorded(ql3_db: Ql3Database) -> None:
    """Without a recorded version every replica fails closed until `ql3 migrate` records one."""
    make_schedules(ql3_db, 1)
    _forget_zone_rules(ql3_db)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        refused = repo.claim_round(command(), 16)
        assert refused.claims == ()
        assert refused.zone_rules.recorded_version is None
        record_zone_rules(ql3_db.dsn("owner"))
        assert len(repo.claim_round(command(), 16).claims) == 1


def test_adopt_fences_claims_taken_under_the_old_rules(ql3_db: Ql3Database) -> None:
    """A claim taken before the switch cannot commit; the new rules claim it once it expires."""
    first, second = make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as old, PostgresScheduleRepository(dsn) as new:
        (held,) = old.claim_round(command("old", lease_ms=1_000), 1).claims
        change = adopt_zone_rules(ql3_db.dsn("admin"), version=MADE_UP, data=made_up_data())
        assert (change.previous, change.current.version) == (zone_rules_version(), MADE_UP)
        assert change.fenced_claims == 1
        assert change.current.recorded_by == "ql3_login_admin"
        (outcome,) = old.commit_decisions([decide(held)]).outcomes
        assert outcome.status is CommitStatus.RACED
        assert fetch(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.runs") == [(0,)]
        # The new rules claim at once what is free, and the fenced row once its lease expired.
        taken = new.claim_round(command("new"), 16)
        assert taken.zone_rules.local_version == MADE_UP
        assert [c.schedule_id for c in taken.claims] == [
            other for other in (first, second) if other != held.schedule_id
        ]
        wait_until(lambda: db_now_ms(dsn) >= held.claim_expires_at_ms, what="fenced claim expiry")
        (retaken,) = new.claim_round(command("new"), 16).claims
        assert retaken.schedule_id == held.schedule_id


def test_adopting_the_recorded_version_changes_nothing(ql3_db: Ql3Database) -> None:
    """Adopt of the version already recorded writes nothing and fences nothing."""
    make_schedules(ql3_db, 1)
    before = read_zone_rules(ql3_db.dsn("admin"))
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_round(command(), 16).claims
        change = adopt_zone_rules(ql3_db.dsn("admin"))
        (outcome,) = repo.commit_decisions([decide(claim)]).outcomes
    assert (change.changed, change.fenced_claims, change.current) == (False, 0, before)
    assert outcome.status is CommitStatus.COMMITTED


def test_adopt_wakes_idle_replicas(ql3_db: Ql3Database) -> None:
    """A switch notifies ql3_schedule_changed, so waiting replicas look again at once."""
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert repo.wait_for_wakeup(0.01) is False
        adopt_zone_rules(ql3_db.dsn("admin"), version=MADE_UP, data=made_up_data())
        assert repo.wait_for_wakeup(5.0) is True
        assert repo.read_cluster_state().zone_rules.local_version == MADE_UP


def test_adopt_refuses_a_version_without_data(ql3_db: Ql3Database) -> None:
    """Another node's version that the database does not store cannot be adopted from here."""
    with pytest.raises(ZoneRulesUnavailableError, match=OTHER):
        adopt_zone_rules(ql3_db.dsn("admin"), version=OTHER)
    record = read_zone_rules(ql3_db.dsn("admin"))
    assert record is not None
    assert record.version == zone_rules_version()


def test_admin_places_cursors_with_the_recorded_rules(ql3_db: Ql3Database) -> None:
    """add, apply and resume place New York's cursors by the recorded (made-up) rules."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    rules = made_up_rules()
    admin_dsn = ql3_db.dsn("admin")
    ny = ScheduleDefinition(cron=DAILY, timezone=NEW_YORK)
    with ScheduleAdmin(admin_dsn) as admin:
        added = admin.add_schedule("added", ScheduleDefinition(cron=DAILY))
        admin.apply_schedules([ScheduleSpec(name="added", definition=ny)])
        applied = admin.get_schedule("added")
        (placed,) = fetch(admin_dsn, _PLACED, (added.schedule_id,))[0]
        assert applied.next_due_at_ms == next_occurrence_ms(DAILY, NEW_YORK, placed, rules=rules)
        assert applied.next_due_at_ms != next_occurrence_ms(DAILY, NEW_YORK, placed)
        created = admin.add_schedule("created", ny)
        (placed,) = fetch(admin_dsn, _PLACED, (created.schedule_id,))[0]
        assert created.next_due_at_ms == next_occurrence_ms(DAILY, NEW_YORK, placed, rules=rules)
        # Resuming a schedule whose cursor was decided meanwhile places it anew.
        admin.pause("created")
        assert created.next_due_at_ms is not None
        with owner_conn(ql3_db) as owner:
            plant_run(owner, created.schedule_id, created.next_due_at_ms, "planted")
        resumed = admin.resume("created")
    assert resumed.next_due_at_ms == next_occurrence_ms(
        DAILY, NEW_YORK, created.next_due_at_ms, rules=rules
    )


def test_paths_that_need_the_recorded_rules_refuse_without_their_data(
    ql3_db: Ql3Database,
) -> None:
    """Admin placement, preview and verify refuse in one line naming both versions."""
    install_zone_rules(ql3_db, OTHER, None)
    admin_dsn = ql3_db.dsn("admin")
    with ScheduleAdmin(admin_dsn) as admin, pytest.raises(ZoneRulesUnavailableError) as caught:
        admin.add_schedule("refused", ScheduleDefinition(cron=DAILY))
    message = str(caught.value)
    assert "\n" not in message
    assert f"tzdata {OTHER}" in message
    assert f"tzdata {zone_rules_version()}" in message
    assert "ql3 zone-rules adopt" in message
    assert fetch(admin_dsn, "SELECT count(*) FROM ql3.trigger_schedules") == [(0,)]
    with pytest.raises(ZoneRulesUnavailableError, match=OTHER):
        load_recorded_zone_rules(admin_dsn, [NEW_YORK])
    with pytest.raises(ZoneRulesUnavailableError, match=OTHER):
        verify_history(admin_dsn)


def test_preview_rules_are_the_recorded_ones(ql3_db: Ql3Database) -> None:
    """The recorded rules loaded for a preview know their zones, by the recorded version."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    rules = load_recorded_zone_rules(ql3_db.dsn("admin"), [NEW_YORK])
    assert rules.version == MADE_UP
    after = db_now_ms(ql3_db.dsn("admin"))
    assert preview_occurrences(DAILY, NEW_YORK, after, 2, rules=rules) == preview_occurrences(
        DAILY, "Asia/Tokyo", after, 2
    )
