"""Each time rule of `ql3 verify` finds exactly its planted defect in a copy of a real history.

`planted.real_history` writes a history through the production paths; each test copies that
database, plants one defect as the schema owner, and requires exactly that finding. The clean
control verifies an unmodified copy: every rule must pass on it, so a rule that reports a real
history is caught as surely as one that misses a defect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from planted import LEASE_MS, History, copy_of, real_history
from ql3_cluster_postgres import verify_history
from repo_helpers import db_now_ms, owner_conn, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here


@pytest.fixture
def history(ql3_db: Ql3Database) -> History:
    return real_history(ql3_db)


def _planted(
    history: History,
    copy_of: Callable[[Ql3Database], Ql3Database],
    *statements: str,
    **params: int,
) -> VerifyReport:
    """Copy the history, run `statements` on the copy as the owner, verify the copy."""
    copy = copy_of(history.db)
    with owner_conn(copy) as owner, owner.transaction():
        for statement in statements:
            owner.execute(statement.encode(), {**_ids(history), **params})
    return history.verify(copy)


def _ids(history: History) -> dict[str, Any]:
    return {
        "fire_once": history.fire_once,
        "skip": history.skip,
        "catch_up": history.catch_up,
        "on_time": history.on_time,
        "worked": history.worked,
        "run": history.retried_run,
    }


def _only(report: VerifyReport, rule: str) -> list[str]:
    """Require every finding to be of `rule`, at least one; return their details."""
    assert set(report.violation_counts) == {rule}, report.lines()
    return [violation.detail for violation in report.violations]


def test_the_unmodified_copy_passes_every_rule(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The clean control: the copied real history has no finding, and its lateness is reported."""
    report = history.verify(copy_of(history.db))
    assert report.ok, report.lines()
    assert (report.lease_ms, report.as_of_ms) == (LEASE_MS, history.as_of_ms)
    lateness = {item.schedule_id: item for item in report.lateness}
    # A minute down under catch_up: its oldest run was admitted about a minute late.
    assert 59_000 <= lateness[history.catch_up].max_ms < 70_000
    assert lateness[history.catch_up].runs >= 60
    assert lateness[history.on_time].max_ms < 5_000 + LEASE_MS
    assert history.skip not in lateness  # no run at all


def test_a_schedule_nobody_decided_is_a_stall(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """Undo the catch_up schedule's only commit: its cursor sits a minute back, undecided."""
    report = _planted(
        history,
        copy_of,
        "DELETE FROM ql3.events WHERE run_id IN"
        " (SELECT id FROM ql3.runs WHERE schedule_id = %(catch_up)s)",
        "DELETE FROM ql3.attempts WHERE run_id IN"
        " (SELECT id FROM ql3.runs WHERE schedule_id = %(catch_up)s)",
        "DELETE FROM ql3.runs WHERE schedule_id = %(catch_up)s",
        "UPDATE ql3.trigger_schedules AS s SET next_due_at_ms = v.first_cursor_ms"
        " FROM ql3.schedule_revisions AS v WHERE v.schedule_id = s.id AND s.id = %(catch_up)s",
    )
    (detail,) = _only(report, "stall")
    assert report.violations[0].schedule_id == history.catch_up
    assert f"to {history.as_of_ms}" in detail
    assert "occurrence(s)" in detail


def test_runs_committed_seconds_after_their_occurrence_under_skip_are_late(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The on-time skip schedule's commit moved 4 s later (all its rows): beyond grace + lease."""
    shift = 4_000
    ((committed,),) = _rows(
        history, "SELECT max(created_at_ms) FROM ql3.runs WHERE schedule_id = %s", history.on_time
    )
    # The copy's rows may not be in the future of the database clock (that is `future`).
    wait_until(lambda: db_now_ms(history.db.dsn("admin")) > committed + shift, what="4 s pass")
    report = _planted(
        history,
        copy_of,
        "UPDATE ql3.runs SET created_at_ms = created_at_ms + %(shift)s"
        " WHERE schedule_id = %(on_time)s",
        "UPDATE ql3.attempts SET created_at_ms = created_at_ms + %(shift)s,"
        " updated_at_ms = updated_at_ms + %(shift)s"
        " WHERE run_id IN (SELECT id FROM ql3.runs WHERE schedule_id = %(on_time)s)",
        "UPDATE ql3.events SET created_at_ms = created_at_ms + %(shift)s"
        " WHERE run_id IN (SELECT id FROM ql3.runs WHERE schedule_id = %(on_time)s)",
        "UPDATE ql3.trigger_schedules SET updated_at_ms = updated_at_ms + %(shift)s"
        " WHERE id = %(on_time)s",
        shift=shift,
    )
    details = _only(report, "late")
    assert all("skip allows grace 5000 + lease 1000 ms" in line for line in details), details


def _rows(history: History, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(history.db.dsn("admin"), autocommit=True) as conn:
        return conn.execute(statement.encode(), params).fetchall()


# One run of the claim's own, inserted as the commit writes it: the run, its first attempt and
# the two admission events, all at the commit time of the given skip record's claim.
_ADMIT_AT = """
WITH k AS (SELECT * FROM ql3.skipped_occurrences WHERE schedule_id = %(schedule)s),
run AS (
    INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,
                          created_at_ms)
    SELECT s.id, s.task_id, {at}, k.owner_id, k.claim_token, k.created_at_ms
    FROM ql3.trigger_schedules AS s, k WHERE s.id = %(schedule)s
    RETURNING id, created_at_ms
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


def _admit(schedule: str, at: str) -> str:
    return _ADMIT_AT.format(at=at).replace("%(schedule)s", f"%({schedule})s")


def test_fire_once_admitting_two_missed_occurrences_of_one_claim_breaks_its_policy(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The skip record gives up its last occurrence to a second run of the same claim."""
    report = _planted(
        history,
        copy_of,
        # The existing run moves one occurrence back (it keeps its id, attempts and events) and a
        # new run takes its place, so run ids still follow occurrences.
        "UPDATE ql3.skipped_occurrences SET last_skipped_ms = last_skipped_ms - 1000,"
        " skipped_count = skipped_count - 1 WHERE schedule_id = %(fire_once)s",
        "UPDATE ql3.runs SET scheduled_for_ms = scheduled_for_ms - 1000"
        " WHERE id = (SELECT min(id) FROM ql3.runs WHERE schedule_id = %(fire_once)s)",
        _admit(
            "fire_once",
            "(SELECT max(scheduled_for_ms) + 1000 FROM ql3.runs WHERE schedule_id = %(fire_once)s)",
        ),
    )
    (detail,) = _only(report, "misfire_policy")
    assert "admitted 2 missed occurrences" in detail
    assert "fire_once admits only the latest" in detail


def test_skip_admitting_an_occurrence_its_claim_missed_breaks_its_policy(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The skip record gives up its first occurrence to a run of the same claim."""
    report = _planted(
        history,
        copy_of,
        _admit(
            "skip",
            "(SELECT first_skipped_ms FROM ql3.skipped_occurrences WHERE schedule_id = %(skip)s)",
        ),
        "UPDATE ql3.skipped_occurrences SET first_skipped_ms = first_skipped_ms + 1000,"
        " skipped_count = skipped_count - 1 WHERE schedule_id = %(skip)s",
    )
    (detail,) = _only(report, "misfire_policy")
    assert "under skip, missed at its claim" in detail


def test_catch_up_leaving_out_an_occurrence_breaks_its_policy(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """One run from the middle of the catch_up claim is gone: not admitted, and so missing."""
    report = _planted(
        history,
        copy_of,
        "DELETE FROM ql3.events WHERE run_id = (SELECT id FROM ql3.runs"
        " WHERE schedule_id = %(catch_up)s ORDER BY scheduled_for_ms OFFSET 30 LIMIT 1)",
        "DELETE FROM ql3.attempts WHERE run_id = (SELECT id FROM ql3.runs"
        " WHERE schedule_id = %(catch_up)s ORDER BY scheduled_for_ms OFFSET 30 LIMIT 1)",
        "DELETE FROM ql3.runs WHERE id = (SELECT id FROM ql3.runs"
        " WHERE schedule_id = %(catch_up)s ORDER BY scheduled_for_ms OFFSET 30 LIMIT 1)",
    )
    # The occurrence left out has neither a run nor a skip record: `missing` is its other name.
    assert set(report.violation_counts) == {"misfire_policy", "missing"}, report.lines()
    (policy,) = [v.detail for v in report.violations if v.rule == "misfire_policy"]
    assert "catch_up admits each" in policy
    assert report.missing == 1


def test_a_skip_record_written_after_its_claims_lease_is_caught(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """A record whose commit time lies 5 s after its claim (lease 1 s) cannot be that commit's."""
    report = _planted(
        history,
        copy_of,
        "UPDATE ql3.skipped_occurrences SET created_at_ms = created_at_ms + 5000"
        " WHERE schedule_id = %(skip)s",
    )
    (detail,) = _only(report, "skip_record")
    assert "not within its claim's lease" in detail


def test_a_skip_record_whose_runs_were_committed_at_another_time_is_caught(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The fire_once record's commit time differs (within the lease) from its claim's run's."""
    report = _planted(
        history,
        copy_of,
        "UPDATE ql3.skipped_occurrences SET created_at_ms = created_at_ms + 1"
        " WHERE schedule_id = %(fire_once)s",
    )
    (detail,) = _only(report, "skip_record")
    assert "run(s) of its claim were committed at" in detail


def test_a_skip_record_with_a_wrong_stored_lateness_is_caught(
    history: History, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """The stored lateness (a generated column, made plain to plant it) no longer adds up."""
    report = _planted(
        history,
        copy_of,
        "ALTER TABLE ql3.skipped_occurrences ALTER COLUMN lateness_newest_ms DROP EXPRESSION",
        "UPDATE ql3.skipped_occurrences SET lateness_newest_ms = lateness_newest_ms - 7"
        " WHERE schedule_id = %(skip)s",
    )
    (detail,) = _only(report, "skip_record")
    assert "stores lateness" in detail


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        pytest.param(
            (
                (
                    "UPDATE ql3.tasks SET max_attempts = 1 WHERE id ="
                    " (SELECT task_id FROM ql3.trigger_schedules WHERE id = %(worked)s)"
                ),
            ),
            "above its task's max_attempts 1",
            id="beyond-max-attempts",
        ),
        pytest.param(
            (
                (
                    "UPDATE ql3.attempts SET started_at_ms = (SELECT finished_at_ms + 500"
                    " FROM ql3.attempts WHERE run_id = %(run)s AND attempt_number = 1)"
                    " WHERE run_id = %(run)s AND attempt_number = 2"
                ),
            ),
            "before its task's retry backoff of 1000 ms",
            id="retry-before-backoff",
        ),
        pytest.param(
            (
                (
                    "UPDATE ql3.attempts SET started_at_ms = (SELECT finished_at_ms - 200"
                    " FROM ql3.attempts WHERE run_id = %(run)s AND attempt_number = 1)"
                    " WHERE run_id = %(run)s AND attempt_number = 2"
                ),
            ),
            "was live (it ended at",
            id="two-live-at-once",
        ),
        pytest.param(
            (
                (
                    "UPDATE ql3.attempts SET state = 'succeeded', finished_at_ms = (SELECT"
                    " started_at_ms + 100 FROM ql3.attempts WHERE run_id = %(run)s"
                    " AND attempt_number = 2) WHERE run_id = %(run)s AND attempt_number = 1"
                ),
                (
                    "UPDATE ql3.events SET kind = 'attempt.succeeded' WHERE kind = 'attempt.failed'"
                    " AND attempt_id = (SELECT id FROM ql3.attempts WHERE run_id = %(run)s"
                    " AND attempt_number = 1)"
                ),
            ),
            "(succeeded) succeeded at",
            id="success-after-a-later-start",
        ),
    ],
)
def test_attempts_out_of_number_or_time_are_caught(
    history: History,
    copy_of: Callable[[Ql3Database], Ql3Database],
    statements: tuple[str, ...],
    expected: str,
) -> None:
    """The retried run's attempts: past max_attempts, retried early, overlapping, late success."""
    report = _planted(history, copy_of, *statements)
    details = _only(report, "attempts")
    assert any(expected in line for line in details), details


def test_an_as_of_after_the_database_clock_or_a_lease_out_of_bounds_is_refused(
    ql3_db: Ql3Database,
) -> None:
    """Judging an instant still to come, or with an impossible lease, is a ValueError by name."""
    now = db_now_ms(ql3_db.dsn("admin"))
    with pytest.raises(ValueError, match="as_of_ms"):
        verify_history(ql3_db.dsn("admin"), lease_ms=LEASE_MS, as_of_ms=now + 3_600_000)
    with pytest.raises(ValueError, match="lease_ms"):
        verify_history(ql3_db.dsn("admin"), lease_ms=999)
    report = verify_history(ql3_db.dsn("admin"), lease_ms=LEASE_MS, as_of_ms=now)
    assert report.ok, report.lines()
    assert report.as_of_ms == now
