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
    history: History, copy_of: Callable[[Ql3Database], Ql3Database], *statements: str
) -> VerifyReport:
    """Copy the history, run `statements` on the copy as the owner, verify the copy."""
    copy = copy_of(history.db)
    with owner_conn(copy) as owner, owner.transaction():
        for statement in statements:
            owner.execute(statement.encode(), _ids(history))
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
    """The on-time skip schedule's commit moved 4 s later (every row of it): beyond grace + lease."""
    shift = 4_000
    ((committed,),) = _rows(
        history, "SELECT max(created_at_ms) FROM ql3.runs WHERE schedule_id = %s", history.on_time
    )
    # The copy's rows may not be in the future of the database clock (that is `future`).
    wait_until(lambda: db_now_ms(history.db.dsn("admin")) > committed + shift, what="4 s pass")
    report = _planted(
        history,
        copy_of,
        f"UPDATE ql3.runs SET created_at_ms = created_at_ms + {shift}"
        " WHERE schedule_id = %(on_time)s",
        f"UPDATE ql3.attempts SET created_at_ms = created_at_ms + {shift},"
        f" updated_at_ms = updated_at_ms + {shift}"
        " WHERE run_id IN (SELECT id FROM ql3.runs WHERE schedule_id = %(on_time)s)",
        f"UPDATE ql3.events SET created_at_ms = created_at_ms + {shift}"
        " WHERE run_id IN (SELECT id FROM ql3.runs WHERE schedule_id = %(on_time)s)",
        f"UPDATE ql3.trigger_schedules SET updated_at_ms = updated_at_ms + {shift}"
        " WHERE id = %(on_time)s",
    )
    details = _only(report, "late")
    assert all("skip allows grace 5000 + lease 1000 ms" in line for line in details), details


def _rows(history: History, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(history.db.dsn("admin"), autocommit=True) as conn:
        return conn.execute(statement.encode(), params).fetchall()
