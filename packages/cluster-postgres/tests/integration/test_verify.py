"""verify_history against real PostgreSQL: a clean history passes, and each rule catches its fault.

The histories are written row by row by `written_history.History` (see there why); the misfire
accounting rules (missing occurrences, skip records) are in test_verify_misfire.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from ql3_cluster_postgres import STALE_CLAIM_GRACE_MS_DEFAULT
from written_history import SECOND, clean_schedule, whole_second

if TYPE_CHECKING:
    from written_history import History


def test_clean_history_passes_with_counts(history: History) -> None:
    """A complete, on-time 1:1:2 history has no violation and counts every occurrence."""
    clean_schedule(history, count=5)
    report = history.verify()
    assert report.ok, report.lines()
    assert (report.schedules, report.runs) == (1, 5)
    assert (report.expected, report.admitted, report.duplicated) == (5, 5, 0)
    assert (report.early, report.missing) == (0, 0)
    assert abs(report.checked_at_ms - history.now_ms()) < 60_000


def test_empty_database_passes(history: History) -> None:
    """A database without schedules is clean."""
    report = history.verify()
    assert report.ok
    assert (report.schedules, report.runs, report.expected) == (0, 0, 0)


def test_duplicate_is_caught_when_unique_is_dropped(history: History) -> None:
    """With the UNIQUE constraint dropped, a second run of one occurrence is a `duplicate`."""
    schedule, first, _ = clean_schedule(history)
    history.conn.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique")
    history.run(schedule, first, first + 50)
    report = history.verify()
    assert report.count("duplicate") == 1
    assert report.duplicated == 1
    assert not report.ok


def test_early_run_is_caught(history: History) -> None:
    """A run committed before its occurrence is `early` (the CHECK dropped as a broken build)."""
    schedule, _, cursor = clean_schedule(history)
    history.conn.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_not_early")
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor - 400)
    report = history.verify()
    assert report.count("early") == 1
    assert report.early == 1


def test_run_committed_in_the_future_is_caught(history: History) -> None:
    """A commit time later than the database clock (a fast node clock) is `future`."""
    now = history.now_ms()
    created = whole_second(now) - 10 * SECOND
    first = whole_second(created) + SECOND
    schedule = history.schedule(created_at_ms=created, next_due_at_ms=first + SECOND)
    history.run(schedule, first, now + 3_600_000)
    history.conn.execute(
        "UPDATE ql3.trigger_schedules SET updated_at_ms = %s WHERE id = %s",
        (now + 3_600_000, schedule[0]),
    )
    report = history.verify()
    assert report.count("future") == 1


@pytest.mark.parametrize(
    ("attempts", "events"),
    [
        (0, ("run.admitted", "attempt.queued")),
        (2, ("run.admitted", "attempt.queued")),
        (1, ("run.admitted",)),
        (1, ("run.admitted", "attempt.queued", "attempt.queued")),
    ],
)
def test_wrong_shape_is_caught(history: History, attempts: int, events: tuple[str, ...]) -> None:
    """A run without exactly one attempt and one event of each admission kind is `shape`."""
    schedule, _, cursor = clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor + 5, attempts=attempts, events=events)
    report = history.verify()
    assert report.count("shape") == 1, report.lines()


def test_worker_events_are_allowed(history: History) -> None:
    """Events of other kinds, appended by workers, do not break the admission shape."""
    schedule, _, cursor = clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor + 5, events=("run.admitted", "attempt.queued", "x.y"))
    assert history.verify().ok


def test_orphan_event_and_mistimed_attempt_are_caught(history: History) -> None:
    """An event of no run and an attempt not written at its run's commit time are `shape`."""
    clean_schedule(history)
    history.conn.execute(
        "INSERT INTO ql3.events (run_id, kind, created_at_ms) VALUES (999999, 'run.admitted', 1)"
    )
    history.conn.execute(
        "UPDATE ql3.attempts SET created_at_ms = created_at_ms - 1, updated_at_ms = updated_at_ms"
        " WHERE id = (SELECT min(id) FROM ql3.attempts)"
    )
    report = history.verify()
    assert report.count("shape") == 2, report.lines()


def test_commit_time_going_backwards_is_caught(history: History) -> None:
    """A later run with an earlier commit time is `time_backwards`."""
    schedule, _, cursor = clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor)
    history.conn.execute(
        "UPDATE ql3.runs SET created_at_ms = created_at_ms + 10000 WHERE id = "
        "(SELECT min(id) FROM ql3.runs)"
    )
    history.conn.execute(
        "UPDATE ql3.attempts SET created_at_ms = created_at_ms + 10000,"
        " updated_at_ms = updated_at_ms + 10000 WHERE run_id = (SELECT min(id) FROM ql3.runs)"
    )
    history.conn.execute(
        "UPDATE ql3.events SET created_at_ms = created_at_ms + 10000"
        " WHERE run_id = (SELECT min(id) FROM ql3.runs)"
    )
    report = history.verify()
    assert report.count("time_backwards") >= 1, report.lines()
    assert report.count("shape") == 0


def test_stale_claim_respects_grace(history: History) -> None:
    """A claim expired 20 s ago is `stale_claim` by default; a larger grace tolerates it."""
    schedule, _, _ = clean_schedule(history)
    now = history.now_ms()
    history.claim(schedule, "ghost", acquired_at_ms=now - 25_000, expires_at_ms=now - 20_000)
    assert STALE_CLAIM_GRACE_MS_DEFAULT < 20_000
    assert history.verify().count("stale_claim") == 1
    assert history.verify(stale_claim_grace_ms=0).count("stale_claim") == 1
    assert history.verify(stale_claim_grace_ms=60_000).ok


def test_live_claim_is_not_stale(history: History) -> None:
    """A claim that expires in the future is not reported."""
    schedule, _, _ = clean_schedule(history)
    now = history.now_ms()
    history.claim(schedule, "live", acquired_at_ms=now, expires_at_ms=now + 30_000)
    assert history.verify(stale_claim_grace_ms=0).ok


def test_cursor_not_after_latest_run_is_caught(history: History) -> None:
    """A cursor at or before the latest admitted occurrence is `cursor`."""
    schedule, first, _ = clean_schedule(history)
    history.move_cursor(schedule, first + 2 * SECOND)
    report = history.verify()
    assert report.count("cursor") == 1, report.lines()


def test_cursor_off_the_cron_is_caught(history: History) -> None:
    """A cursor that is not an occurrence of the cron expression is `cursor`."""
    schedule, _, cursor = clean_schedule(history)
    history.move_cursor(schedule, cursor + 250)
    report = history.verify()
    assert report.count("cursor") == 1, report.lines()


def test_run_off_the_cron_is_caught(history: History) -> None:
    """A run for a time that is not an occurrence of the cron is `not_occurrence`."""
    schedule, _, cursor = clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor - 500, cursor)
    report = history.verify()
    assert report.count("not_occurrence") == 1, report.lines()


def test_since_limits_the_checked_occurrences(history: History) -> None:
    """Occurrences before since_ms are not checked; later ones still are."""
    schedule, first, _ = clean_schedule(history, count=6)
    history.forget_run(schedule, first + SECOND)
    assert history.verify().count("missing") == 1
    later = history.verify(since_ms=first + 2 * SECOND)
    assert later.ok, later.lines()
    assert (later.runs, later.expected) == (4, 4)
    assert schedule[0] == later.per_schedule[0].schedule_id


def test_checker_runs_as_admin_and_writes_nothing(history: History) -> None:
    """The checker works with ql3_admin's rights and leaves the database untouched."""
    clean_schedule(history)

    def snapshot() -> tuple[Any, ...]:
        row = history.conn.execute(
            "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.events),"
            " (SELECT max(version) FROM ql3.trigger_schedules),"
            " (SELECT max(updated_at_ms) FROM ql3.trigger_schedules)"
        ).fetchone()
        assert row is not None
        return tuple(row)

    before = snapshot()
    assert history.verify().ok
    assert snapshot() == before


def test_bad_arguments_are_refused(history: History) -> None:
    """A negative grace is a ValueError naming the argument."""
    with pytest.raises(ValueError, match="stale_claim_grace_ms"):
        history.verify(stale_claim_grace_ms=-1)


def test_first_cursor_just_before_creation_is_clean(history: History) -> None:
    """A first cursor placed after a clock read a few ms before the creation stamp is exact."""
    now = history.now_ms()
    first = whole_second(now) - 10 * SECOND
    schedule = history.schedule(
        created_at_ms=first + 3, next_due_at_ms=first + 3 * SECOND, first_cursor_ms=first
    )
    for index in range(3):
        history.run(schedule, first + index * SECOND, first + index * SECOND + 9)
    report = history.verify()
    assert report.ok, report.lines()


def test_first_cursor_before_its_placement_is_caught(history: History) -> None:
    """A first cursor earlier than the first occurrence after its recorded placement: `revision`.

    No slack is allowed: even one occurrence (1 s) before the placement is reported.
    """
    now = history.now_ms()
    first = whole_second(now) - 10 * SECOND
    schedule = history.schedule(created_at_ms=first + 1_003, next_due_at_ms=first + 3 * SECOND)
    history.conn.execute(
        "UPDATE ql3.schedule_revisions SET first_cursor_ms = %s WHERE schedule_id = %s",
        (first, schedule[0]),
    )
    for index in range(3):
        history.run(schedule, first + index * SECOND, first + index * SECOND + 9)
    report = history.verify()
    assert report.count("revision") == 1, report.lines()


def test_run_long_before_creation_is_caught(history: History) -> None:
    """A run for an occurrence minutes before the schedule existed is `not_occurrence`."""
    schedule, first, _ = clean_schedule(history)
    history.run(schedule, first - 300 * SECOND, first - 300 * SECOND + 5)
    report = history.verify()
    assert report.count("not_occurrence") == 1, report.lines()
