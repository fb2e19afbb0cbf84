"""`ql3 verify` accounts for every occurrence (DESIGN §7), on histories the real code wrote.

Schedules come from ScheduleAdmin and decisions from the repository, as in production; only the
faults are planted by SQL (as the owner).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    VerifyReport,
    verify_history,
)
from ql3_runtime_core import CommitStatus, MisfirePolicy, ScheduleDefinition
from repo_helpers import command, db_now_ms, decide, make_schedules, owner_conn, wait_until
from verify_compare import checked_verify

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

MINUTE = 60_000


def _cycle(db: Ql3Database) -> list[int]:
    """Claim and commit every due schedule once, as a Coordinator cycle does; return skips."""
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        commits = [decide(claim) for claim in repo.claim_due_schedules(command(), 16)]
        batch = repo.commit_decisions(commits)
    assert {outcome.status for outcome in batch.outcomes} <= {CommitStatus.COMMITTED}
    return [commit.decision.skipped for commit in commits]


def _verify(db: Ql3Database) -> VerifyReport:
    return checked_verify(db.dsn("admin"), stale_claim_grace_ms=0)


def _wait_until_due(db: Ql3Database, due_ms: int) -> None:
    wait_until(lambda: db_now_ms(db.dsn("admin")) >= due_ms, what=f"{due_ms} is due")


def _wait_a_second(db: Ql3Database) -> None:
    start = db_now_ms(db.dsn("admin"))
    wait_until(lambda: db_now_ms(db.dsn("admin")) >= start + 1_000, what="a second passes")


@pytest.mark.parametrize("policy", [MisfirePolicy.SKIP, MisfirePolicy.FIRE_ONCE])
def test_an_outage_under_a_dropping_policy_is_fully_accounted_for(
    ql3_db: Ql3Database, policy: MisfirePolicy
) -> None:
    """After 15 minutes down, the occurrences passed without a run are in one skip record."""
    make_schedules(ql3_db, 1, policy=policy, grace_ms=1_000, shift_back_ms=15 * MINUTE)
    (skipped,) = _cycle(ql3_db)
    assert skipped >= 15 * 60 - 3
    _wait_a_second(ql3_db)
    # The next cycle may come more than the 1 s grace after its occurrence (a loaded machine,
    # a cursor just past a second boundary): then it skips that one too, in a record of its own.
    (later,) = _cycle(ql3_db)
    report = _verify(ql3_db)
    assert report.ok, report.lines()
    assert report.skipped == skipped + later
    assert report.missing == 0
    assert report.expected == report.admitted


def test_a_cursor_moved_ahead_by_sql_is_missing(ql3_db: Ql3Database) -> None:
    """A skip-policy cursor moved 10 minutes ahead with nothing admitted or recorded: `missing`.

    Before skip records existed this history passed verify: under skip no rule could tell a
    dropped occurrence from a skipped one.
    """
    make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=1_000)
    _cycle(ql3_db)
    assert _verify(ql3_db).ok
    with owner_conn(ql3_db) as owner:
        owner.execute("UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms + 600000")
    report = _verify(ql3_db)
    assert report.count("missing") == 1, report.lines()
    assert report.missing == 600
    assert "600 occurrence(s)" in report.lines()[0]


def test_a_skip_record_with_a_wrong_count_is_caught(ql3_db: Ql3Database) -> None:
    """A planted skip record whose count is not its range's is `skip_record`."""
    make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=1_000, shift_back_ms=MINUTE)
    _cycle(ql3_db)
    assert _verify(ql3_db).ok
    with owner_conn(ql3_db) as owner:
        owner.execute("UPDATE ql3.skipped_occurrences SET skipped_count = skipped_count + 1")
    report = _verify(ql3_db)
    assert report.count("skip_record") == 1, report.lines()
    assert "counts" in report.lines()[0]


def test_definition_changes_between_commits_stay_accounted_for(ql3_db: Ql3Database) -> None:
    """Runs and skips under several revisions (re-placed, redefined) all verify clean."""
    make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=1_000, shift_back_ms=MINUTE)
    _cycle(ql3_db)
    changes = [
        ScheduleDefinition(cron="*/2 * * * * *", misfire_policy=MisfirePolicy.SKIP),
        ScheduleDefinition(
            cron="*/2 * * * * *", misfire_policy=MisfirePolicy.CATCH_UP, misfire_grace_ms=1_000
        ),
    ]
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        for definition in changes:
            admin.apply_schedules([ScheduleSpec(name="s00000", definition=definition)])
            (record,) = admin.list_schedules()
            assert record.next_due_at_ms is not None
            _wait_until_due(ql3_db, record.next_due_at_ms)
            _cycle(ql3_db)
    report = _verify(ql3_db)
    assert report.ok, report.lines()
    assert report.admitted >= 3


def test_a_definition_changed_by_sql_is_caught(ql3_db: Ql3Database) -> None:
    """A cron changed past ScheduleAdmin leaves the live revision behind: `revision`."""
    make_schedules(ql3_db, 1)
    _cycle(ql3_db)
    with owner_conn(ql3_db) as owner:
        owner.execute("UPDATE ql3.trigger_schedules SET cron = '*/3 * * * * *'")
    report = _verify(ql3_db)
    assert report.count("revision") == 1, report.lines()


def test_since_inside_a_skip_record_counts_its_occurrences_as_skipped(ql3_db: Ql3Database) -> None:
    """A `since_ms` inside a skip record: the occurrences it covers from there are skipped.

    They were counted as expected (each needing a run) before: `expected` exceeded `admitted` by
    the part of the record after the cut, on a clean history.
    """
    make_schedules(ql3_db, 1, policy=MisfirePolicy.SKIP, grace_ms=1_000, shift_back_ms=MINUTE)
    _cycle(ql3_db)
    with owner_conn(ql3_db) as owner:
        row = owner.execute(
            "SELECT first_skipped_ms, last_skipped_ms FROM ql3.skipped_occurrences"
        ).fetchone()
    assert row is not None
    first, last = int(row[0]), int(row[1])
    assert last - first >= 50_000  # an every-second schedule, a minute down
    since = first + 20_000  # inside the record, on an occurrence
    report = verify_history(ql3_db.dsn("admin"), since_ms=since, stale_claim_grace_ms=0)
    assert report.ok, report.lines()
    (verdict,) = report.per_schedule
    assert verdict.skipped == (last - since) // 1_000 + 1
    assert verdict.expected == verdict.admitted
    assert verdict.missing == 0
