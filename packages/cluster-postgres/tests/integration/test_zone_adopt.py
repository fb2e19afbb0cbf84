"""Switching zone rules loses nothing, against real PostgreSQL.

The database records `2000a` (made up: New York is Tokyo) and then adopts this node's real
version, so exactly one zone changes. Adopt must move New York's cursors in the same transaction
(every occurrence the old rules had due is a run or a `zone_rules_changed` skip record, the new
cursor is the new rules' first occurrence after the switch), leave every other zone alone, keep
the history of versions, order itself with claims in flight, and `verify_history` must judge each
span by the rules that were in force.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
from psycopg.rows import dict_row
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    adopt_zone_rules,
    read_zone_rule_history,
    read_zone_rules,
    verify_history,
)
from ql3_runtime_core import (
    ClusterScheduleClaim,
    CommitStatus,
    MisfirePolicy,
    ScheduleDefinition,
    checked_commit,
    count_occurrences_ms,
    latest_occurrence_ms,
    next_occurrence_ms,
    resolve_cluster_schedule_decision,
    zone_rules_version,
)
from repo_helpers import command, db_now_ms, fetch, proxy_in_front_of, through, wait_until
from zone_helpers import (
    MADE_UP,
    NEW_YORK,
    install_zone_rules,
    made_up_data,
    made_up_rules,
    tokyo_hours,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

DAILY = "0 9 * * *"
_SCHEDULE = "SELECT next_due_at_ms, version, state FROM ql3.trigger_schedules WHERE id = %s"
_REVISIONS = (
    "SELECT revision, reason, first_cursor_ms, end_cursor_ms, placed_after_ms,"
    " zone_rules_version FROM ql3.schedule_revisions WHERE schedule_id = %s ORDER BY revision"
)
_SKIPS = (
    "SELECT first_skipped_ms, last_skipped_ms, skipped_count, reason, zone_rules_from,"
    " zone_rules_to, misfire_policy, claim_token, created_at_ms"
    " FROM ql3.skipped_occurrences WHERE schedule_id = %s ORDER BY id"
)


def _admit_due(db: Ql3Database) -> int:
    """Claim, decide with the round's rules and commit what is due, as a replica does."""
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claim_round = repo.claim_round(command(), 16)
        commits = [
            checked_commit(
                claim,
                resolve_cluster_schedule_decision(claim, 256, rules=claim_round.rules),
                256,
                rules=claim_round.rules,
            )
            for claim in claim_round.claims
        ]
        batch = repo.commit_decisions(commits)
    assert all(o.status is CommitStatus.COMMITTED for o in batch.outcomes)
    return sum(len(o.runs) for o in batch.outcomes)


def test_adopt_moves_only_the_cursors_of_changed_zones(ql3_db: Ql3Database) -> None:
    """New York's cursor moves to the new rules' occurrence; UTC and Paris stay untouched."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    zones = {"ny": NEW_YORK, "utc": "UTC", "paris": "Europe/Paris"}
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        ids = {
            name: admin.add_schedule(
                name, ScheduleDefinition(cron=DAILY, timezone=zone)
            ).schedule_id
            for name, zone in zones.items()
        }
    before = {name: fetch(ql3_db.dsn("admin"), _SCHEDULE, (sid,))[0] for name, sid in ids.items()}
    change = adopt_zone_rules(ql3_db.dsn("admin"))
    took_effect = change.current.recorded_at_ms
    assert (change.previous, change.current.version) == (MADE_UP, zone_rules_version())
    assert change.changed_zones == (NEW_YORK,)
    (move,) = change.moves
    expected = next_occurrence_ms(DAILY, NEW_YORK, took_effect)  # the real rules
    assert (move.schedule_id, move.cursor_after_ms, move.skipped_count) == (ids["ny"], expected, 0)
    assert move.cursor_before_ms == before["ny"][0] != expected
    after = {name: fetch(ql3_db.dsn("admin"), _SCHEDULE, (sid,))[0] for name, sid in ids.items()}
    assert after["ny"][0] == expected
    assert after["ny"][1] > before["ny"][1]
    assert (after["utc"], after["paris"]) == (before["utc"], before["paris"])
    revisions = fetch(ql3_db.dsn("admin"), _REVISIONS, (ids["ny"],))
    assert revisions == [
        (1, "created", before["ny"][0], before["ny"][0], revisions[0][4], MADE_UP),
        (2, "zone_rules", expected, None, took_effect, zone_rules_version()),
    ]
    assert len(fetch(ql3_db.dsn("admin"), _REVISIONS, (ids["utc"],))) == 1
    history = read_zone_rule_history(ql3_db.dsn("admin"))
    assert [(row.version, row.superseded_at_ms) for row in history] == [
        (MADE_UP, took_effect),
        (zone_rules_version(), None),
    ]
    assert history[1].took_effect_at_ms == took_effect
    report = verify_history(ql3_db.dsn("admin"), stale_claim_grace_ms=0)
    assert report.ok, report.lines()


def test_adopt_skips_what_the_old_rules_had_due_and_verify_judges_both_spans(
    ql3_db: Ql3Database,
) -> None:
    """Runs under the old rules, one zone_rules_changed record for the rest, verify clean."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    old_rules = made_up_rules()
    cron = f"* * {tokyo_hours(ql3_db)} * * *"  # due now under the made-up rules only
    definition = ScheduleDefinition(
        cron=cron, timezone=NEW_YORK, misfire_policy=MisfirePolicy.CATCH_UP
    )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        record = admin.add_schedule("ny", definition)
    first = record.next_due_at_ms
    assert first is not None
    admin_dsn = ql3_db.dsn("admin")
    wait_until(lambda: db_now_ms(admin_dsn) >= first + 1_000, what="two occurrences due")
    assert _admit_due(ql3_db) >= 2  # decided under the made-up rules
    ((cursor, _, _),) = fetch(admin_dsn, _SCHEDULE, (record.schedule_id,))
    wait_until(lambda: db_now_ms(admin_dsn) >= cursor + 2_000, what="three more occurrences due")
    change = adopt_zone_rules(admin_dsn)
    took_effect = change.current.recorded_at_ms
    (move,) = change.moves
    last = latest_occurrence_ms(cron, NEW_YORK, took_effect, cursor, rules=old_rules)
    assert last is not None
    count = count_occurrences_ms(cron, NEW_YORK, cursor, last, rules=old_rules)
    assert count >= 3
    assert (move.skipped_first_ms, move.skipped_last_ms, move.skipped_count) == (
        cursor,
        last,
        count,
    )
    ((skip_first, skip_last, skipped, reason, old, new, policy, token, created),) = fetch(
        admin_dsn, _SKIPS, (record.schedule_id,)
    )
    assert (skip_first, skip_last, skipped) == (cursor, last, count)
    assert (reason, old, new, policy, token) == (
        "zone_rules_changed",
        MADE_UP,
        zone_rules_version(),
        None,
        None,
    )
    assert created >= took_effect >= last
    new_cursor = next_occurrence_ms(cron, NEW_YORK, took_effect)
    assert fetch(admin_dsn, _SCHEDULE, (record.schedule_id,))[0][0] == new_cursor
    assert new_cursor - took_effect > 3_600_000  # New York's real hours are far away
    revisions = fetch(admin_dsn, _REVISIONS, (record.schedule_id,))
    # The old revision ends where the old rules' cursor stands after the skipped range.
    assert revisions[0][3] == next_occurrence_ms(cron, NEW_YORK, last, rules=old_rules)
    assert revisions[1][1:3] == ("zone_rules", new_cursor)
    report = verify_history(admin_dsn, stale_claim_grace_ms=0)
    assert report.ok, report.lines()
    (verdict,) = report.per_schedule
    assert (verdict.skipped, verdict.missing) == (count, 0)
    assert verdict.admitted == verdict.expected >= 2


def test_verify_checks_zone_rules_changed_records(ql3_db: Ql3Database) -> None:
    """A zone skip record with a wrong count or naming other versions is a finding."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    cron = f"* * {tokyo_hours(ql3_db)} * * *"
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        record = admin.add_schedule("ny", ScheduleDefinition(cron=cron, timezone=NEW_YORK))
    admin_dsn = ql3_db.dsn("admin")
    first = record.next_due_at_ms
    assert first is not None
    wait_until(lambda: db_now_ms(admin_dsn) >= first + 2_000, what="occurrences due")
    adopt_zone_rules(admin_dsn)
    assert verify_history(admin_dsn, stale_claim_grace_ms=0).ok
    with psycopg.connect(ql3_db.dsn("owner"), autocommit=True) as owner:
        owner.execute(
            "UPDATE ql3.skipped_occurrences SET skipped_count = skipped_count + 1,"
            " zone_rules_to = '1999z'"
        )
    lines = "\n".join(verify_history(admin_dsn, stale_claim_grace_ms=0).lines())
    assert "counts" in lines
    assert "names a switch from tzdata 2000a to 1999z" in lines


def test_a_claim_read_under_the_old_rules_cannot_commit_after_adopt(ql3_db: Ql3Database) -> None:
    """Claim reads 2000a, adopt commits, then that claim's commit: raced, nothing written."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.add_schedule("utc", ScheduleDefinition(cron="* * * * * *"))
    admin_dsn = ql3_db.dsn("admin")
    wait_until(lambda: bool(_due(admin_dsn)), what="the schedule is due")
    claim_sql = resources.files("ql3_cluster_postgres").joinpath("sql", "claim_due_schedules.sql")
    params = {
        "owner_id": "old-rules",
        "claim_token": uuid4(),
        "lease_ms": 30_000,
        "batch_limit": 1,
        "zone_rules_version": MADE_UP,
    }
    with psycopg.connect(ql3_db.dsn("runtime")) as claimer:
        # The claim statement runs and reads 2000a; its transaction is still open...
        row = claimer.cursor(row_factory=dict_row).execute(claim_sql.read_text(), params).fetchone()
        assert row is not None
        assert (row["recorded_zone_rules_version"], row["owner_id"]) == (MADE_UP, "old-rules")
        # ...when the adopt commits (UTC did not change: no schedule row lock stops it)...
        change = adopt_zone_rules(admin_dsn)
        assert change.changed
        claimer.commit()
    claim = _claim_from(row)
    old_rules = made_up_rules()
    decision = resolve_cluster_schedule_decision(claim, 16, rules=old_rules)
    assert decision.occurrences
    # ...and only then is the decision made under 2000a committed.
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (outcome,) = repo.commit_decisions(
            [checked_commit(claim, decision, 16, rules=old_rules)]
        ).outcomes
    assert outcome.status is CommitStatus.RACED
    assert fetch(admin_dsn, "SELECT count(*) FROM ql3.runs") == [(0,)]


def _due(dsn: str) -> list[tuple[Any, ...]]:
    return fetch(
        dsn,
        "SELECT id FROM ql3.trigger_schedules WHERE next_due_at_ms <="
        " floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
    )


def _claim_from(row: dict[str, Any]) -> ClusterScheduleClaim:
    """Build the claim a replica would have read from the claim statement's row."""
    return ClusterScheduleClaim(
        schedule_id=row["schedule_id"],
        task_id=row["task_id"],
        version=row["version"],
        owner_id=row["owner_id"],
        claim_token=row["claim_token"],
        claim_acquired_at_ms=row["claim_acquired_at_ms"],
        claim_expires_at_ms=row["claim_expires_at_ms"],
        next_due_at_ms=row["next_due_at_ms"],
        definition=ScheduleDefinition(
            cron=row["cron"],
            timezone=row["timezone"],
            misfire_policy=row["misfire_policy"],
            misfire_grace_ms=row["misfire_grace_ms"],
            start_at_ms=row["start_at_ms"],
            end_at_ms=row["end_at_ms"],
        ),
    )


def test_a_dry_run_lists_the_moves_and_changes_nothing(ql3_db: Ql3Database) -> None:
    """--dry-run reports the schedules that would move and writes, locks and records nothing."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        record = admin.add_schedule("ny", ScheduleDefinition(cron=DAILY, timezone=NEW_YORK))
        admin.add_schedule("utc", ScheduleDefinition(cron=DAILY))
    admin_dsn = ql3_db.dsn("admin")
    snapshot = (
        "SELECT (SELECT array_agg(next_due_at_ms ORDER BY id) FROM ql3.trigger_schedules),"
        " (SELECT count(*) FROM ql3.schedule_revisions),"
        " (SELECT count(*) FROM ql3.zone_rule_versions)"
    )
    before = fetch(admin_dsn, snapshot)
    recorded = read_zone_rules(admin_dsn)
    change = adopt_zone_rules(admin_dsn, dry_run=True)
    assert change.dry_run
    assert change.changed_zones == (NEW_YORK,)
    (move,) = change.moves
    assert move.schedule_id == record.schedule_id
    assert move.cursor_after_ms == next_occurrence_ms(
        DAILY, NEW_YORK, change.current.recorded_at_ms
    )
    assert fetch(admin_dsn, snapshot) == before
    assert read_zone_rules(admin_dsn) == recorded


def test_an_adopt_whose_commit_reply_is_lost_is_settled_from_durable_facts(
    ql3_db: Ql3Database,
) -> None:
    """A swallowed COMMIT reply: the adopt reads the version history and reports the switch."""
    install_zone_rules(ql3_db, MADE_UP, made_up_data())
    admin_dsn = ql3_db.dsn("admin")
    with proxy_in_front_of(admin_dsn) as proxy:
        proxy.drop_next_commit_reply()
        change = adopt_zone_rules(through(proxy, admin_dsn))
    assert change.changed
    assert proxy.commit_replies_dropped == 1
    record = read_zone_rules(admin_dsn)
    assert record == change.current
