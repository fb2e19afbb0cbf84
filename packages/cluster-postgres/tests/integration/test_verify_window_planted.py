"""`ql3 verify` knows windows: a run before `start_at` or after `end_at` is reported.

A real windowed history is written through the production paths (ScheduleAdmin places the
cursor at the window's start; the repository claims, the runtime-core decision admits every
occurrence of the window and exhausts the schedule, the fenced commit writes it). Each defect is
planted in a copy of that database as the schema owner: one run of the claim's own, an
occurrence of the cron one second outside the window. The unmodified copy is the clean control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planted import copy_of
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    verify_history,
)
from ql3_runtime_core import CommitStatus, MisfirePolicy, ScheduleDefinition, ScheduleState
from repo_helpers import command, db_now_ms, decide, fetch, owner_conn, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here

# One run as the fenced commit writes it, with its first attempt and both admission events, by
# the claim of the window's real runs, committed with them (or, for an occurrence after that
# commit, at the occurrence itself, the schedule row written then too, as a commit writes it).
_PLANT_RUN = """
WITH first AS (SELECT * FROM ql3.runs WHERE schedule_id = %(schedule)s ORDER BY id LIMIT 1),
run AS (
    INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,
                          created_at_ms)
    SELECT schedule_id, task_id, %(at)s, owner_id, claim_token, greatest(created_at_ms, %(at)s)
    FROM first
    RETURNING id, created_at_ms
),
row AS (
    UPDATE ql3.trigger_schedules AS s SET updated_at_ms = greatest(s.updated_at_ms, r.created_at_ms)
    FROM run AS r WHERE s.id = %(schedule)s
),
attempt AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT id, 1, 'queued', created_at_ms, created_at_ms FROM run
    RETURNING id, run_id, created_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
SELECT run_id, NULL, 'run.admitted', created_at_ms FROM attempt
UNION ALL
SELECT run_id, id, 'attempt.queued', created_at_ms FROM attempt
"""


def _windowed_history(db: Ql3Database) -> tuple[int, int, int]:
    """Write a window of three every-second occurrences, all admitted; (schedule, start, end)."""
    now = db_now_ms(db.dsn("admin"))
    start = now - now % 1_000 + 2_000
    end = start + 2_000
    definition = ScheduleDefinition(
        cron="* * * * * *",
        misfire_policy=MisfirePolicy.CATCH_UP,
        start_at_ms=start,
        end_at_ms=end,
    )
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.apply_schedules([ScheduleSpec(name="windowed", definition=definition)])
        (record,) = admin.list_schedules()
    assert record.next_due_at_ms == start  # placed at the window's start, not at now
    wait_until(lambda: db_now_ms(db.dsn("admin")) > end, what="the window is over")
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim)])
    assert [o.status for o in batch.outcomes] == [CommitStatus.COMMITTED]
    rows = fetch(db.dsn("admin"), "SELECT scheduled_for_ms FROM ql3.runs ORDER BY id")
    assert rows == [(start,), (start + 1_000,), (end,)]
    ((state,),) = fetch(db.dsn("admin"), "SELECT state FROM ql3.trigger_schedules")
    assert state == ScheduleState.EXHAUSTED.value
    return record.schedule_id, start, end


def _plant(copy: Ql3Database, schedule_id: int, at_ms: int) -> Any:
    with owner_conn(copy) as owner:
        owner.execute(_PLANT_RUN.encode(), {"schedule": schedule_id, "at": at_ms})
    return verify_history(copy.dsn("admin"))


def test_a_run_before_start_at_or_after_end_at_is_reported(
    ql3_db: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """Runs one second outside the window are `not_occurrence`; the clean copy passes.

    The run after `end_at` is the only finding. The run before `start_at` also comes after
    the window's runs in id order, so `order` reports it too, and nothing else does.
    """
    schedule_id, start, end = _windowed_history(ql3_db)
    # The run planted after end_at is committed at its occurrence: not in the database's future.
    wait_until(lambda: db_now_ms(ql3_db.dsn("admin")) > end + 1_000, what="end_at + 1 s passes")
    clean = verify_history(copy_of(ql3_db).dsn("admin"))
    assert clean.ok, clean.lines()
    assert clean.missing == 0

    after = _plant(copy_of(ql3_db), schedule_id, end + 1_000)
    assert set(after.violation_counts) == {"not_occurrence"}, after.lines()
    (detail,) = [v.detail for v in after.violations]
    assert f"admits {end + 1_000}, outside the range of every revision" in detail

    before = _plant(copy_of(ql3_db), schedule_id, start - 1_000)
    assert set(before.violation_counts) == {"not_occurrence", "order"}, before.lines()
    (detail,) = [v.detail for v in before.violations if v.rule == "not_occurrence"]
    assert f"admits {start - 1_000}, outside the range of every revision" in detail
