"""Admin changes without a race and the schedule revisions they write (DESIGN §7).

The interleaving test drives a replica from inside the admin's transaction, through the
`step_hook` seam called between the admin's lock and its clock read: the old order (clock read,
then lock) let the replica's commit land in between and left the new cursor at an admitted run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import (
    CommitStatus,
    MisfirePolicy,
    ScheduleDefinition,
    ScheduleState,
    next_occurrence_ms,
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

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

_REVISIONS = (
    "SELECT revision, reason, cron, misfire_policy, end_at_ms, first_cursor_ms, end_cursor_ms,"
    " placed_after_ms, created_at_ms, ended_at_ms FROM ql3.schedule_revisions"
    " WHERE schedule_id = %s ORDER BY revision"
)


def _cursor_and_latest_run(db: Ql3Database, schedule_id: int) -> tuple[int, int | None]:
    ((cursor, latest),) = fetch(
        db.dsn("admin"),
        "SELECT s.next_due_at_ms, (SELECT max(scheduled_for_ms) FROM ql3.runs"
        " WHERE schedule_id = s.id) FROM ql3.trigger_schedules s WHERE s.id = %s",
        (schedule_id,),
    )
    return int(cursor), latest


@pytest.mark.parametrize("prune", [False, True], ids=["edit", "apply-prune"])
def test_a_commit_racing_an_admin_edit_never_leaves_the_cursor_at_an_admitted_run(
    ql3_db: Ql3Database, *, prune: bool
) -> None:
    """A replica committing while the admin changes a schedule: the new cursor follows its runs.

    At the barrier between the admin's two steps, the database clock passes two more seconds
    and a replica claims and commits whatever it can. Read-then-lock let that commit admit the
    occurrence the admin then placed the cursor on; lock-then-read makes the row unclaimable
    until the admin commits, and places the cursor after every decided occurrence.
    """
    (schedule_id,) = make_schedules(ql3_db, 1, prefix="edited")
    make_schedules(ql3_db, 1, prefix="pruned")
    runtime = ql3_db.dsn("runtime")
    outcomes: list[CommitStatus] = []

    with PostgresScheduleRepository(runtime) as repo:

        def replica_commits_at_the_barrier(step: str) -> None:
            assert step == "locked"
            start = db_now_ms(runtime)
            wait_until(lambda: db_now_ms(runtime) >= start + 2_000, what="two seconds pass")
            claims = [
                c for c in repo.claim_due_schedules(command(), 16) if c.schedule_id == schedule_id
            ]
            batch = repo.commit_decisions([decide(claim) for claim in claims])
            outcomes.extend(outcome.status for outcome in batch.outcomes)

        edited = ScheduleSpec(
            name="edited00000",
            definition=ScheduleDefinition(
                cron="*/1 * * * * *", misfire_policy=MisfirePolicy.CATCH_UP
            ),
        )
        with ScheduleAdmin(ql3_db.dsn("admin"), step_hook=replica_commits_at_the_barrier) as admin:
            report = admin.apply_schedules([edited], prune=prune)
        assert report.updated == ("edited00000",)
        cursor, latest = _cursor_and_latest_run(ql3_db, schedule_id)
        assert latest is None or cursor > latest, (cursor, latest, outcomes)
        # The next commits of the schedule admit only new occurrences: nothing already admitted.
        wait_until(lambda: db_now_ms(runtime) >= cursor, what="the new cursor is due")
        (claim,) = [
            c for c in repo.claim_due_schedules(command(), 16) if c.schedule_id == schedule_id
        ]
        (outcome,) = [
            o
            for o in repo.commit_decisions([decide(claim)]).outcomes
            if o.schedule_id == schedule_id
        ]
    assert outcome.status is CommitStatus.COMMITTED
    assert outcome.already_admitted == ()
    assert outcome.runs


def test_a_cursor_placed_anew_goes_after_the_latest_decided_occurrence(
    ql3_db: Ql3Database,
) -> None:
    """Even a run or skip record later than the database clock keeps a new cursor after it."""
    run_schedule, skip_schedule = make_schedules(ql3_db, 2, shift_back_ms=0)
    now = db_now_ms(ql3_db.dsn("admin"))
    future = now - now % 1_000 + 600_000
    with owner_conn(ql3_db) as owner:
        plant_run(owner, run_schedule, future, "stepped")
        owner.execute(
            "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms, last_skipped_ms,"
            " skipped_count, misfire_policy, claim_acquired_at_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (%s, %s, %s, 2, 'skip', %s, 'stepped', gen_random_uuid(), %s)",
            (skip_schedule, future - 1_000, future, future + 5_000, future + 5_000),
        )
    changed = ScheduleDefinition(cron="*/2 * * * * *", misfire_policy=MisfirePolicy.CATCH_UP)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.apply_schedules(
            [ScheduleSpec(name=f"s{i:05d}", definition=changed) for i in range(2)]
        )
        cursors = {r.schedule_id: r.next_due_at_ms for r in admin.list_schedules()}
    after = next_occurrence_ms("*/2 * * * * *", "UTC", future)
    assert cursors == {run_schedule: after, skip_schedule: after}


def test_revisions_follow_creation_and_every_definition_change(ql3_db: Ql3Database) -> None:
    """Create, re-place, redefine and exhaust each open a revision; pause and resume do not."""
    hourly = ScheduleDefinition(cron="0 * * * *")
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        created = admin.add_schedule("rev", hourly)
        sid = created.schedule_id
        (first,) = fetch(ql3_db.dsn("admin"), _REVISIONS, (sid,))
        expected = (1, "created", "0 * * * *", "fire_once", None, created.next_due_at_ms, None)
        assert first[:7] == expected
        assert first[7] is not None
        assert first[7] <= created.created_at_ms <= first[8]
        assert created.next_due_at_ms == first[7] - first[7] % 3_600_000 + 3_600_000

        admin.pause("rev")
        admin.resume("rev")
        assert len(fetch(ql3_db.dsn("admin"), _REVISIONS, (sid,))) == 1

        daily = ScheduleDefinition(cron="0 0 * * *")
        admin.apply_schedules([ScheduleSpec(name="rev", definition=daily)])
        replaced = admin.get_schedule("rev")
        skip = daily.model_copy(update={"misfire_policy": MisfirePolicy.SKIP})
        admin.apply_schedules([ScheduleSpec(name="rev", definition=skip)])
        ended = skip.model_copy(update={"end_at_ms": 0, "start_at_ms": None})
        admin.apply_schedules([ScheduleSpec(name="rev", definition=ended)])
        exhausted = admin.get_schedule("rev")
    rows = fetch(ql3_db.dsn("admin"), _REVISIONS, (sid,))
    assert [row[:2] for row in rows] == [
        (1, "created"),
        (2, "replaced"),
        (3, "redefined"),
        (4, "redefined"),
    ]
    assert rows[0][6] == created.next_due_at_ms  # ended at the cursor it had
    assert rows[1][5] == rows[1][6] == rows[2][5] == rows[2][6] == rows[3][5]
    assert rows[1][5] == replaced.next_due_at_ms
    assert (rows[2][3], rows[3][4]) == ("skip", 0)
    assert rows[1][7] is not None  # a placed cursor records the instant it was placed after
    assert rows[2][7] is None
    assert [row[9] is None for row in rows] == [False, False, False, True]
    assert all(row[8] <= (row[9] if row[9] is not None else row[8]) for row in rows)
    assert (exhausted.state, exhausted.next_due_at_ms) == (ScheduleState.EXHAUSTED, None)


def test_a_retired_schedule_brought_back_opens_a_replaced_revision(ql3_db: Ql3Database) -> None:
    """Retire keeps the revision; applying the schedule again places a cursor and a revision."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        spec = ScheduleSpec(name="back", definition=ScheduleDefinition(cron="0 * * * *"))
        admin.apply_schedules([spec])
        admin.apply_schedules([], prune=True)
        retired = admin.get_schedule("back")
        admin.apply_schedules([spec])
        back = admin.get_schedule("back")
    rows = fetch(ql3_db.dsn("admin"), _REVISIONS, (back.schedule_id,))
    assert [(row[0], row[1]) for row in rows] == [(1, "created"), (2, "replaced")]
    assert rows[0][6] == retired.next_due_at_ms
    assert rows[1][5] == back.next_due_at_ms
    assert back.state is ScheduleState.ACTIVE


def test_status_and_the_repository_agree_on_overdue_schedules(ql3_db: Ql3Database) -> None:
    """Active cursors more than lease + grace behind are overdue; paused or recent ones are not."""
    late, recent, paused = make_schedules(ql3_db, 3, grace_ms=1_000, shift_back_ms=0)
    with owner_conn(ql3_db) as owner:
        owner.execute(
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - %s WHERE id = %s",
            (40_000, late),
        )
        owner.execute(
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - %s,"
            " state = 'paused' WHERE id = %s",
            (40_000, paused),
        )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        report = admin.status(lease_ms=30_000)
        lenient = admin.status(lease_ms=60_000)
    assert {s.schedule_id: s.overdue for s in report.schedules} == {
        late: True,
        recent: False,
        paused: False,
    }
    assert (report.schedules_overdue, lenient.schedules_overdue) == (1, 0)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert repo.count_overdue_schedules(30_000) == 1
        assert repo.count_overdue_schedules(60_000) == 0
