"""`ql3 verify` and the test kit's oracle beside manual Runs: apart from the cron series, judged.

A real history is written through the production paths: ScheduleAdmin triggers manual Runs
while the repository claims and commits the schedule's cron occurrences (what a Coordinator
does), one trigger exactly at the millisecond of an occurrence. Verify and the independent oracle
find it clean, with every occurrence admitted once and the manual Runs counted apart. Defects are
planted in copies of that database as the schema owner; the unmodified copy is the clean control.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

from planted import copy_of
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin, verify_history
from ql3_runtime_core import CommitStatus, TaskExecution
from ql3_testkit import plant_manual_run_at_cursor
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    make_schedules,
    owner_conn,
    wait_until,
)
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here

SHELL = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=1_000)
TRIGGERS = 6


def _commit_due(db: Ql3Database) -> int:
    """Claim and commit the schedule once, as a Coordinator cycle does; the runs it admitted."""
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert all(o.status is CommitStatus.COMMITTED for o in batch.outcomes)
    return sum(len(o.runs) for o in batch.outcomes)


def _history(db: Ql3Database) -> tuple[int, int]:
    """Write cron occurrences and manual Runs side by side; (schedule id, occurrence at trigger)."""
    (schedule_id,) = make_schedules(db, 1, prefix="mixed", execution=SHELL, shift_back_ms=3_000)
    # Admit what is due first, so the cursor is an occurrence after the schedule's creation: a
    # first cursor on a second boundary may lie a few ms before created_at_ms (placed from the
    # admin's first clock read), and a trigger can never be admitted before its schedule existed.
    admitted = _commit_due(db)
    same_ms = plant_manual_run_at_cursor(db.dsn("owner"), schedule_id, owner_id="ql3_admin_login")

    def trigger() -> None:
        with ScheduleAdmin(db.dsn("admin")) as admin:
            for n in range(TRIGGERS):
                admin.trigger_run("mixed00000", f"beside-{n}", payload={"n": n})

    triggering = threading.Thread(target=trigger)
    triggering.start()
    while triggering.is_alive() or admitted < 4:
        admitted += _commit_due(db)
    triggering.join()
    # Every occurrence up to the database's now is admitted: the last commit is after it.
    now = db_now_ms(db.dsn("admin"))
    wait_until(lambda: db_now_ms(db.dsn("admin")) >= now + 1_000, what="one more occurrence")
    _commit_due(db)
    return schedule_id, same_ms


def test_manual_runs_beside_the_coordinator_leave_every_occurrence_once(
    ql3_db: Ql3Database,
) -> None:
    """Cron runs: every occurrence once, the one at a trigger's instant too; manual Runs apart."""
    schedule_id, same_ms = _history(ql3_db)
    cron = [
        at
        for (at,) in fetch(
            ql3_db.dsn("admin"),
            "SELECT scheduled_for_ms FROM ql3.runs WHERE kind = 'cron' ORDER BY scheduled_for_ms",
        )
    ]
    assert len(cron) == len(set(cron)) >= 4
    assert [b - a for a, b in itertools.pairwise(cron)] == [1_000] * (len(cron) - 1)
    assert same_ms in cron
    manual = fetch(
        ql3_db.dsn("admin"),
        "SELECT count(*), count(DISTINCT request_id) FROM ql3.runs WHERE kind = 'manual'",
    )
    assert manual == [(TRIGGERS + 1, TRIGGERS + 1)]
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    assert (report.runs, report.manual_runs) == (len(cron), TRIGGERS + 1)
    (verdict,) = report.per_schedule
    assert verdict.schedule_id == schedule_id
    assert (verdict.missing, verdict.duplicated) == (0, 0)
    assert verdict.admitted == len(cron)


def _planted(copy: Ql3Database, statement: str) -> Any:
    with owner_conn(copy) as owner:
        assert owner.execute(statement).rowcount >= 1
    return verify_history(copy.dsn("admin"))


def test_planted_manual_run_defects_are_reported(
    ql3_db: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """Each defect is reported by the rule that owns it; the clean copy passes."""
    _history(ql3_db)
    clean = verify_history(copy_of(ql3_db).dsn("admin"))
    assert clean.ok, clean.lines()

    # A manual Run claiming an instant it was not admitted at (a backdated trigger).
    backdated = _planted(
        copy_of(ql3_db),
        "UPDATE ql3.runs SET scheduled_for_ms = scheduled_for_ms - 1000"
        " WHERE request_id = 'beside-2'",
    )
    assert set(backdated.violation_counts) == {"manual_run"}, backdated.lines()
    assert "'beside-2'" in backdated.violations[0].detail

    # A cron run relabelled manual: its occurrence is missing, and it was never triggered.
    relabelled = _planted(
        copy_of(ql3_db),
        "UPDATE ql3.runs SET kind = 'manual', request_id = 'relabelled' WHERE id ="
        " (SELECT min(id) FROM ql3.runs WHERE kind = 'cron')",
    )
    assert {"missing", "manual_run"} <= set(relabelled.violation_counts), relabelled.lines()
    assert relabelled.violation_counts["manual_run"] >= 1

    # A manual Run whose admission event does not name its request.
    unannounced = _planted(
        copy_of(ql3_db),
        "UPDATE ql3.events SET payload = '{}' WHERE kind = 'run.admitted' AND run_id ="
        " (SELECT id FROM ql3.runs WHERE request_id = 'beside-0')",
    )
    assert set(unannounced.violation_counts) == {"manual_run"}, unannounced.lines()

    # The shape rule applies to manual Runs: an admission without its attempt.queued event.
    unqueued = _planted(
        copy_of(ql3_db),
        "DELETE FROM ql3.events WHERE kind = 'attempt.queued' AND run_id ="
        " (SELECT id FROM ql3.runs WHERE request_id = 'beside-1')",
    )
    assert "shape" in unqueued.violation_counts, unqueued.lines()
    assert "manual_run" not in unqueued.violation_counts
