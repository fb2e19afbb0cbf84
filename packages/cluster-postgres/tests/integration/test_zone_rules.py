"""Zone rules no node can change (issue 10.3), against real PostgreSQL.

The database records one zone rules version; a replica whose version differs claims nothing (the
claim statement itself compares them), and only an explicit operator step switches the record.
A replica "with other rules" is a repository given another version string: that is exactly what
a replica with another `tzdata` would send.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    adopt_zone_rules,
    read_zone_rules,
    record_zone_rules,
)
from ql3_runtime_core import CommitStatus, zone_rules_version
from repo_helpers import command, db_now_ms, decide, fetch, make_schedules, owner_conn, wait_until

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

OTHER = "1999z"
_CLAIMS = "SELECT id, version, claim_token FROM ql3.trigger_schedules ORDER BY id"


def _forget_zone_rules(db: Ql3Database) -> None:
    with owner_conn(db) as conn:
        conn.execute("DELETE FROM ql3.zone_rules")


def test_a_migrated_database_records_this_nodes_zone_rules(ql3_db: Ql3Database) -> None:
    """Preparing a database (as `ql3 migrate` does) records the migrating node's version."""
    record = read_zone_rules(ql3_db.dsn("admin"))
    assert record is not None
    assert record.version == zone_rules_version()
    assert record.recorded_by == "ql3_login_owner"
    assert record.recorded_at_ms <= db_now_ms(ql3_db.dsn("admin"))


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


def test_a_replica_with_other_zone_rules_claims_nothing(ql3_db: Ql3Database) -> None:
    """The claim statement refuses a differing version: no row claimed, none touched."""
    make_schedules(ql3_db, 2)
    before = fetch(ql3_db.superuser_dsn, _CLAIMS)
    with PostgresScheduleRepository(ql3_db.dsn("runtime"), zone_rules_version=OTHER) as other:
        refused = other.claim_round(command("other"), 16)
        state = other.read_cluster_state()
    assert refused.claims == ()
    assert refused.zone_rules.recorded_version == zone_rules_version()
    assert refused.zone_rules.local_version == OTHER
    assert not refused.zone_rules.agrees
    assert not state.zone_rules.agrees
    assert fetch(ql3_db.superuser_dsn, _CLAIMS) == before
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as same:
        assert len(same.claim_round(command("same"), 16).claims) == 2


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


def test_adopt_switches_every_replica_at_once(ql3_db: Ql3Database) -> None:
    """Adopt makes the other version the only one that claims, and fences claims taken before."""
    first, second = make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with (
        PostgresScheduleRepository(dsn) as old,
        PostgresScheduleRepository(dsn, zone_rules_version=OTHER) as new,
    ):
        (held,) = old.claim_round(command("old", lease_ms=1_000), 1).claims
        change = adopt_zone_rules(ql3_db.dsn("admin"), version=OTHER)
        assert (change.previous, change.current.version) == (zone_rules_version(), OTHER)
        assert change.fenced_claims == 1
        assert change.current.recorded_by == "ql3_login_admin"
        # The old rules decide nothing any more: no new claim, and the claim taken before the
        # switch cannot commit.
        refused = old.claim_round(command("old"), 16)
        assert (refused.claims, refused.zone_rules.recorded_version) == ((), OTHER)
        (outcome,) = old.commit_decisions([decide(held)]).outcomes
        assert outcome.status is CommitStatus.RACED
        assert fetch(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.runs") == [(0,)]
        # The new rules claim at once what is free, and the fenced row once its lease expired.
        assert [c.schedule_id for c in new.claim_round(command("new"), 16).claims] == [
            other for other in (first, second) if other != held.schedule_id
        ]
        wait_until(lambda: db_now_ms(dsn) >= held.claim_expires_at_ms, what="fenced claim expiry")
        (taken,) = new.claim_round(command("new"), 16).claims
        assert taken.schedule_id == held.schedule_id


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
    with PostgresScheduleRepository(ql3_db.dsn("runtime"), zone_rules_version=OTHER) as repo:
        assert repo.wait_for_wakeup(0.01) is False
        adopt_zone_rules(ql3_db.dsn("admin"), version=OTHER)
        assert repo.wait_for_wakeup(5.0) is True
        assert repo.read_cluster_state().zone_rules.agrees
