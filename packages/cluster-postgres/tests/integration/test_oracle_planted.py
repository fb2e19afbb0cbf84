"""The test kit's oracle can fail: planted defects in a copy of a real history, one at a time.

A history is written by the real code (ScheduleAdmin, the repository's claim and fenced commit,
the Coordinator's decision): a catch_up schedule with a few Runs and a fire_once schedule whose
outage left a skip record. It is copied (CREATE DATABASE ... TEMPLATE) and one defect is planted
in the copy as the schema owner, past the constraints that would refuse it. The oracle must
report exactly that defect on exactly that schedule; the untouched original is the clean control
and must pass. `verify_history` must flag the same (verify_compare), so each plant is also a
differential test of the product's checker.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from planted import copy_of
from ql3_cluster_postgres import PostgresScheduleRepository, verify_history
from ql3_runtime_core import CommitStatus, MisfirePolicy
from ql3_testkit import Ql3Database, oracle_verdict
from repo_helpers import command, db_now_ms, decide, fetch, make_schedules, wait_until
from verify_compare import compare

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here

if TYPE_CHECKING:
    from collections.abc import Callable


def _middle_run(owner: psycopg.Connection[Any], schedule_id: int) -> int:
    runs = owner.execute(
        "SELECT id FROM ql3.runs WHERE schedule_id = %s ORDER BY scheduled_for_ms", (schedule_id,)
    ).fetchall()
    assert len(runs) >= 3, runs  # a run with neighbours on both sides
    return int(runs[len(runs) // 2][0])


def _lose_a_run(owner: psycopg.Connection[Any], catch_up: int, _: int) -> None:
    """Plant a missing occurrence: one Run (and its attempt and events) gone."""
    run = _middle_run(owner, catch_up)
    owner.execute("DELETE FROM ql3.events WHERE run_id = %s", (run,))
    owner.execute("DELETE FROM ql3.attempts WHERE run_id = %s", (run,))
    owner.execute("DELETE FROM ql3.runs WHERE id = %s", (run,))


def _admit_twice(owner: psycopg.Connection[Any], catch_up: int, _: int) -> None:
    """Plant a duplicate Run of one occurrence, with its own full admission shape."""
    owner.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique")
    run = _middle_run(owner, catch_up)
    row = owner.execute(
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) SELECT schedule_id, task_id, scheduled_for_ms, owner_id, %s,"
        " created_at_ms FROM ql3.runs WHERE id = %s RETURNING id, created_at_ms",
        (uuid.uuid4(), run),
    ).fetchone()
    assert row is not None
    _admission_rows(owner, int(row[0]), int(row[1]))


def _admit_early(owner: psycopg.Connection[Any], catch_up: int, _: int) -> None:
    """Plant an early Run: committed 400 ms before its occurrence, its rows consistent with that."""
    owner.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_not_early")
    run = _middle_run(owner, catch_up)
    owner.execute(
        "UPDATE ql3.runs SET created_at_ms = scheduled_for_ms - 400 WHERE id = %s", (run,)
    )
    for table in ("attempts", "events"):
        owner.execute(
            f"UPDATE ql3.{table} SET created_at_ms = r.created_at_ms"  # noqa: S608 - fixed names
            " FROM ql3.runs AS r WHERE r.id = %s AND run_id = r.id",
            (run,),
        )


def _miscount_a_skip(owner: psycopg.Connection[Any], _: int, fire_once: int) -> None:
    """Plant a skip record whose count is not the number of occurrences in its range."""
    owner.execute("ALTER TABLE ql3.skipped_occurrences DROP CONSTRAINT skipped_occurrences_count")
    changed = owner.execute(
        "UPDATE ql3.skipped_occurrences SET skipped_count = skipped_count + 1"
        " WHERE schedule_id = %s",
        (fire_once,),
    ).rowcount
    assert changed == 1


def _leave_a_claim(owner: psycopg.Connection[Any], catch_up: int, _: int) -> None:
    """Plant a claim left at rest: taken 10 s ago under a 1 s lease, never committed."""
    owner.execute(
        "UPDATE ql3.trigger_schedules SET claim_owner_id = 'ghost', claim_token = %s,"
        " updated_at_ms = updated_at_ms - 10000, claim_expires_at_ms = updated_at_ms - 9000"
        " WHERE id = %s",
        (uuid.uuid4(), catch_up),
    )


def _admission_rows(owner: psycopg.Connection[Any], run: int, at_ms: int) -> None:
    """Write the first attempt and the two admission events of a planted Run (DESIGN §5)."""
    owner.execute(
        "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)"
        " VALUES (%s, 1, 'succeeded', %s, %s)",
        (run, at_ms, at_ms),
    )
    for kind in ("run.admitted", "attempt.queued"):
        owner.execute(
            "INSERT INTO ql3.events (run_id, kind, created_at_ms) VALUES (%s, %s, %s)",
            (run, kind, at_ms),
        )


# plant -> (the finding's kind, which schedule: 0 the catch_up one, 1 the fire_once one)
PLANTS: dict[str, tuple[Any, str, int]] = {
    "missing": (_lose_a_run, "missing", 0),
    "duplicate": (_admit_twice, "duplicate", 0),
    "early": (_admit_early, "early", 0),
    "skip_count": (_miscount_a_skip, "skip_record", 1),
    "claim_at_rest": (_leave_a_claim, "stale_claim", 0),
}


@pytest.fixture
def history(ql3_db: Ql3Database) -> tuple[int, int]:
    """Write a real history; return (catch_up schedule, fire_once schedule)."""
    (catch_up,) = make_schedules(ql3_db, 1, prefix="c", shift_back_ms=6_000)
    (fire_once,) = make_schedules(
        ql3_db,
        1,
        prefix="f",
        policy=MisfirePolicy.FIRE_ONCE,
        grace_ms=1_000,
        shift_back_ms=20_000,
    )
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        commits = [decide(claim) for claim in repo.claim_due_schedules(command(), 16)]
        batch = repo.commit_decisions(commits)
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
    # catch_up skipped nothing; fire_once's outage left a skip record to plant in.
    none, some = sorted(commit.decision.skipped for commit in commits)
    assert none == 0, (none, some)
    assert some > 10, (none, some)
    return catch_up, fire_once


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_the_oracle_reports_each_planted_defect_and_passes_the_clean_control(
    ql3_db: Ql3Database,
    history: tuple[int, int],
    copy_of: Callable[[Ql3Database], Ql3Database],
    plant: str,
) -> None:
    """Exactly the planted (kind, schedule) is reported on the copy; the original is clean."""
    action, kind, which = PLANTS[plant]
    copy = copy_of(ql3_db)
    with psycopg.connect(copy.dsn("owner"), autocommit=True) as owner:
        action(owner, *history)
    planted = oracle_verdict(copy.dsn("admin"), stale_claim_grace_ms=0)
    assert planted.flagged() == {(kind, history[which])}, planted.lines()
    compare(verify_history(copy.dsn("admin"), stale_claim_grace_ms=0), planted)
    control = oracle_verdict(ql3_db.dsn("admin"), stale_claim_grace_ms=0)
    assert control.ok, control.lines()
    assert control.occurrences >= 20  # both schedules' spans were walked, not skipped
    compare(verify_history(ql3_db.dsn("admin"), stale_claim_grace_ms=0), control)


def test_the_oracle_reports_a_stall_past_the_cursor(
    ql3_db: Ql3Database, history: tuple[int, int]
) -> None:
    """No Coordinator runs after the history: once occurrences fall due, a cutoff sees a stall."""
    catch_up, fire_once = history
    cursor = max(
        int(row[0])
        for row in fetch(ql3_db.dsn("admin"), "SELECT next_due_at_ms FROM ql3.trigger_schedules")
    )
    wait_until(lambda: db_now_ms(ql3_db.dsn("admin")) > cursor, what="both cursors are due")
    now = db_now_ms(ql3_db.dsn("admin"))
    assert oracle_verdict(ql3_db.dsn("admin"), stale_claim_grace_ms=0).ok  # up to the cursor
    stalled = oracle_verdict(ql3_db.dsn("admin"), stale_claim_grace_ms=0, due_before_ms=now)
    assert stalled.flagged() == {("stall", catch_up), ("stall", fire_once)}, stalled.lines()
