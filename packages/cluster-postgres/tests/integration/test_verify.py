"""verify_history against real PostgreSQL: a clean history passes, and each rule catches its fault.

Histories are written row by row as the superuser (not through the repository) so that each test
can build exactly the broken history a rule exists for, including ones the schema's constraints
would refuse (those tests drop the constraint first, as a broken build would). Each schedule gets
the revision 1 the admin writes with it (migrations/0004).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from ql3_cluster_postgres import STALE_CLAIM_GRACE_MS_DEFAULT, VerifyReport
from ql3_runtime_core import next_occurrence_ms
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

SECOND = 1_000


@dataclass
class History:
    """Writes tasks, schedules and runs straight into a QL3 database, as the superuser."""

    conn: psycopg.Connection[Any]
    admin_dsn: str
    names: list[str] = field(default_factory=list)

    def now_ms(self) -> int:
        """Read the database clock."""
        row = self.conn.execute(
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()
        assert row is not None
        return int(row[0])

    def schedule(
        self,
        *,
        created_at_ms: int,
        next_due_at_ms: int | None,
        cron: str = "* * * * * *",
        policy: str = "catch_up",
        grace_ms: int = 60_000,
        state: str = "active",
        updated_at_ms: int | None = None,
        end_at_ms: int | None = None,
        first_cursor_ms: int | None = None,
    ) -> tuple[int, int]:
        """Insert a task, trigger, schedule and its revision 1; return (schedule id, task id).

        The revision starts at `first_cursor_ms` (default: the first occurrence after creation),
        placed after a clock read no later than the creation, as the admin records it.
        """
        name = f"task-{len(self.names)}-{uuid.uuid4().hex[:6]}"
        self.names.append(name)
        row = self.conn.execute(
            "INSERT INTO ql3.tasks (name, created_at_ms) VALUES (%s, %s) RETURNING id",
            (name, created_at_ms),
        ).fetchone()
        assert row is not None
        task_id = int(row[0])
        row = self.conn.execute(
            "INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (%s, %s) RETURNING id",
            (task_id, created_at_ms),
        ).fetchone()
        assert row is not None
        row = self.conn.execute(
            "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, misfire_policy,"
            " misfire_grace_ms, state, next_due_at_ms, end_at_ms, updated_at_ms, created_at_ms)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                row[0],
                task_id,
                cron,
                policy,
                grace_ms,
                state,
                next_due_at_ms,
                end_at_ms,
                updated_at_ms if updated_at_ms is not None else created_at_ms,
                created_at_ms,
            ),
        ).fetchone()
        assert row is not None
        schedule_id = int(row[0])
        first = first_cursor_ms
        if first is None:
            first = next_occurrence_ms(cron, "UTC", created_at_ms)
        self.conn.execute(
            "INSERT INTO ql3.schedule_revisions (schedule_id, revision, reason, cron, timezone,"
            " misfire_policy, misfire_grace_ms, end_at_ms, first_cursor_ms, placed_after_ms,"
            " created_at_ms) VALUES (%s, 1, 'created', %s, 'UTC', %s, %s, %s, %s, %s, %s)",
            (
                schedule_id,
                cron,
                policy,
                grace_ms,
                end_at_ms,
                first,
                min(created_at_ms, first - 1),
                created_at_ms,
            ),
        )
        return schedule_id, task_id

    def skip(
        self,
        schedule: tuple[int, int],
        first_ms: int,
        last_ms: int,
        count: int,
        *,
        acquired_at_ms: int,
        policy: str = "skip",
    ) -> None:
        """Insert a skip record as a commit by a claim acquired at `acquired_at_ms` writes it."""
        self.conn.execute(
            "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms,"
            " last_skipped_ms, skipped_count, misfire_policy, claim_acquired_at_ms, owner_id,"
            " claim_token, created_at_ms) VALUES (%s, %s, %s, %s, %s, %s, 'test', %s, %s)",
            (
                schedule[0],
                first_ms,
                last_ms,
                count,
                policy,
                acquired_at_ms,
                uuid.uuid4(),
                acquired_at_ms + 5,
            ),
        )

    def run(
        self,
        schedule: tuple[int, int],
        scheduled_for_ms: int,
        created_at_ms: int,
        *,
        attempts: int = 1,
        events: tuple[str, ...] = ("run.admitted", "attempt.queued"),
    ) -> int:
        """Insert a run with its attempts and events; return the run id."""
        schedule_id, task_id = schedule
        row = self.conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) VALUES (%s, %s, %s, 'test', %s, %s) RETURNING id",
            (schedule_id, task_id, scheduled_for_ms, uuid.uuid4(), created_at_ms),
        ).fetchone()
        assert row is not None
        run_id = int(row[0])
        attempt_id = None
        for number in range(1, attempts + 1):
            # At most one live attempt per run (the database's index): earlier ones have ended.
            row = self.conn.execute(
                "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms,"
                " updated_at_ms) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (
                    run_id,
                    number,
                    "queued" if number == attempts else "failed",
                    created_at_ms,
                    created_at_ms,
                ),
            ).fetchone()
            assert row is not None
            attempt_id = int(row[0])
        for kind in events:
            self.conn.execute(
                "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
                " VALUES (%s, %s, %s, %s)",
                (run_id, attempt_id, kind, created_at_ms),
            )
        # The commit also writes its time on the schedule row (DESIGN §5).
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET updated_at_ms = greatest(updated_at_ms, %s)"
            " WHERE id = %s",
            (created_at_ms, schedule_id),
        )
        return run_id

    def move_cursor(self, schedule: tuple[int, int], next_due_at_ms: int) -> None:
        """Set the schedule's cursor, as if a commit had moved it."""
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET next_due_at_ms = %s WHERE id = %s",
            (next_due_at_ms, schedule[0]),
        )

    def forget_run(self, schedule: tuple[int, int], scheduled_for_ms: int) -> None:
        """Delete one occurrence's run with its attempts and events (a lost admission)."""
        occurrence = (schedule[0], scheduled_for_ms)
        self.conn.execute(
            "DELETE FROM ql3.events WHERE run_id IN"
            " (SELECT id FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s)",
            occurrence,
        )
        self.conn.execute(
            "DELETE FROM ql3.attempts WHERE run_id IN"
            " (SELECT id FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s)",
            occurrence,
        )
        self.conn.execute(
            "DELETE FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s", occurrence
        )

    def claim(
        self, schedule: tuple[int, int], owner: str, *, acquired_at_ms: int, expires_at_ms: int
    ) -> None:
        """Leave a claim by `owner` on the schedule row, as a replica that never committed."""
        self.conn.execute(
            "UPDATE ql3.trigger_schedules SET claim_owner_id = %s, claim_token = %s,"
            " updated_at_ms = %s, claim_expires_at_ms = %s WHERE id = %s",
            (owner, uuid.uuid4(), acquired_at_ms, expires_at_ms, schedule[0]),
        )

    def verify(self, **options: Any) -> VerifyReport:
        """Run the checker as the ql3_admin login (and the reference: the same verdict)."""
        return checked_verify(self.admin_dsn, **options)


@pytest.fixture
def history(ql3_db: Ql3Database) -> Iterator[History]:
    """Give each test a fresh QL3 database, written by the superuser, checked as ql3_admin."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        yield History(conn, ql3_db.dsn("admin"))


def _second(ms: int) -> int:
    """Round down to a whole second (an occurrence of the every-second cron)."""
    return ms - ms % SECOND


def _clean_schedule(history: History, count: int = 5) -> tuple[tuple[int, int], int, int]:
    """Write a schedule created 30 s ago with `count` on-time runs.

    Returns (schedule, first occurrence, cursor).
    """
    now = history.now_ms()
    created = _second(now) - 30 * SECOND + 500
    first = _second(created) + SECOND
    cursor = first + count * SECOND
    schedule = history.schedule(created_at_ms=created, next_due_at_ms=cursor)
    for index in range(count):
        history.run(schedule, first + index * SECOND, first + index * SECOND + 7)
    return schedule, first, cursor


def test_clean_history_passes_with_counts(history: History) -> None:
    """A complete, on-time 1:1:2 history has no violation and counts every occurrence."""
    _clean_schedule(history, count=5)
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
    schedule, first, _ = _clean_schedule(history)
    history.conn.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique")
    history.run(schedule, first, first + 50)
    report = history.verify()
    assert report.count("duplicate") == 1
    assert report.duplicated == 1
    assert not report.ok


def test_early_run_is_caught(history: History) -> None:
    """A run committed before its occurrence is `early` (the CHECK dropped as a broken build)."""
    schedule, _, cursor = _clean_schedule(history)
    history.conn.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_not_early")
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor - 400)
    report = history.verify()
    assert report.count("early") == 1
    assert report.early == 1


def test_run_committed_in_the_future_is_caught(history: History) -> None:
    """A commit time later than the database clock (a fast node clock) is `future`."""
    now = history.now_ms()
    created = _second(now) - 10 * SECOND
    first = _second(created) + SECOND
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
    schedule, _, cursor = _clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor + 5, attempts=attempts, events=events)
    report = history.verify()
    assert report.count("shape") == 1, report.lines()


def test_worker_events_are_allowed(history: History) -> None:
    """Events of other kinds, appended by workers, do not break the admission shape."""
    schedule, _, cursor = _clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor, cursor + 5, events=("run.admitted", "attempt.queued", "x.y"))
    assert history.verify().ok


def test_orphan_event_and_mistimed_attempt_are_caught(history: History) -> None:
    """An event of no run and an attempt not written at its run's commit time are `shape`."""
    _clean_schedule(history)
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
    schedule, _, cursor = _clean_schedule(history)
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
    schedule, _, _ = _clean_schedule(history)
    now = history.now_ms()
    history.claim(schedule, "ghost", acquired_at_ms=now - 25_000, expires_at_ms=now - 20_000)
    assert STALE_CLAIM_GRACE_MS_DEFAULT < 20_000
    assert history.verify().count("stale_claim") == 1
    assert history.verify(stale_claim_grace_ms=0).count("stale_claim") == 1
    assert history.verify(stale_claim_grace_ms=60_000).ok


def test_live_claim_is_not_stale(history: History) -> None:
    """A claim that expires in the future is not reported."""
    schedule, _, _ = _clean_schedule(history)
    now = history.now_ms()
    history.claim(schedule, "live", acquired_at_ms=now, expires_at_ms=now + 30_000)
    assert history.verify(stale_claim_grace_ms=0).ok


def test_cursor_not_after_latest_run_is_caught(history: History) -> None:
    """A cursor at or before the latest admitted occurrence is `cursor`."""
    schedule, first, _ = _clean_schedule(history)
    history.move_cursor(schedule, first + 2 * SECOND)
    report = history.verify()
    assert report.count("cursor") == 1, report.lines()


def test_cursor_off_the_cron_is_caught(history: History) -> None:
    """A cursor that is not an occurrence of the cron expression is `cursor`."""
    schedule, _, cursor = _clean_schedule(history)
    history.move_cursor(schedule, cursor + 250)
    report = history.verify()
    assert report.count("cursor") == 1, report.lines()


def test_run_off_the_cron_is_caught(history: History) -> None:
    """A run for a time that is not an occurrence of the cron is `not_occurrence`."""
    schedule, _, cursor = _clean_schedule(history)
    history.move_cursor(schedule, cursor + SECOND)
    history.run(schedule, cursor - 500, cursor)
    report = history.verify()
    assert report.count("not_occurrence") == 1, report.lines()


def test_catch_up_gap_is_missing(history: History) -> None:
    """Under catch_up every occurrence the cursor passed needs a run: a gap is `missing`."""
    schedule, first, _ = _clean_schedule(history)
    history.forget_run(schedule, first + 2 * SECOND)
    report = history.verify()
    assert report.count("missing") == 1, report.lines()
    assert (report.expected, report.admitted, report.missing) == (5, 4, 1)


def test_skip_policy_gap_needs_a_skip_record(history: History) -> None:
    """Under skip a gap is accounted for only by a skip record of missed occurrences."""
    now = history.now_ms()
    created = _second(now) - 40 * SECOND + 500
    first = _second(created) + SECOND
    recorded = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 11 * SECOND, policy="skip", grace_ms=2_000
    )
    # A claim at first+10.5 s missed first..first+8 s (more than 2 s late) and admitted first+9 s
    # and first+10 s on time.
    history.skip(recorded, first, first + 8 * SECOND, 9, acquired_at_ms=first + 10_500)
    history.run(recorded, first + 9 * SECOND, first + 10_510)
    history.run(recorded, first + 10 * SECOND, first + 10_510)
    bare = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 11 * SECOND, policy="skip", grace_ms=2_000
    )
    history.run(bare, first + 9 * SECOND, first + 10_510)
    history.run(bare, first + 10 * SECOND, first + 10_510)
    report = history.verify()
    assert report.count("missing") == 1, report.lines()
    assert [v.schedule_id for v in report.violations] == [bare[0]]
    verdicts = {verdict.schedule_id: verdict for verdict in report.per_schedule}
    assert (verdicts[recorded[0]].skipped, verdicts[recorded[0]].expected) == (9, 2)
    assert (verdicts[bare[0]].missing, verdicts[bare[0]].expected) == (9, 11)


def test_fire_once_must_admit_the_occurrence_after_its_skip_record(history: History) -> None:
    """Under fire_once the occurrence right after a skip record must have a run."""
    now = history.now_ms()
    created = _second(now) - 40 * SECOND + 500
    first = _second(created) + SECOND
    good = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 6 * SECOND, policy="fire_once", grace_ms=0
    )
    history.skip(
        good, first, first + 4 * SECOND, 5, acquired_at_ms=first + 5_500, policy="fire_once"
    )
    history.run(good, first + 5 * SECOND, first + 5_510)
    bad = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 6 * SECOND, policy="fire_once", grace_ms=0
    )
    history.skip(
        bad, first, first + 3 * SECOND, 4, acquired_at_ms=first + 5_500, policy="fire_once"
    )
    history.run(bad, first + 5 * SECOND, first + 5_510)
    report = history.verify()
    assert {v.schedule_id for v in report.violations} == {bad[0]}, report.lines()
    assert report.count("skip_record") == 1
    assert report.count("missing") == 1


@pytest.mark.parametrize(
    ("first", "last", "count", "acquired", "policy", "problem"),
    [
        (0, 4, 4, 5_500, "skip", "counts 4 occurrences, its range holds 5"),
        (0, 4, 5, 5_500, "fire_once", "records policy 'fire_once'"),
        (0, 4, 5, 4_400, "skip", "on time at the claim"),
        (0, 3, 4, 5_500, "skip", "which that claim had missed too"),
    ],
    ids=["wrong-count", "other-policy", "on-time", "stops-early"],
)
def test_inconsistent_skip_record_is_caught(
    history: History,
    *,
    first: int,
    last: int,
    count: int,
    acquired: int,
    policy: str,
    problem: str,
) -> None:
    """A skip record that is not the exact range of missed occurrences is `skip_record`."""
    now = history.now_ms()
    created = _second(now) - 40 * SECOND + 500
    start = _second(created) + SECOND
    schedule = history.schedule(
        created_at_ms=created, next_due_at_ms=start + 6 * SECOND, policy="skip", grace_ms=500
    )
    history.skip(
        schedule,
        start + first * SECOND,
        start + last * SECOND,
        count,
        acquired_at_ms=start + acquired,
        policy=policy,
    )
    for at in range(last + 1, 6):
        history.run(schedule, start + at * SECOND, start + max(acquired, at * SECOND) + 5)
    report = history.verify()
    assert report.count("skip_record") >= 1, report.lines()
    assert any(problem in line for line in report.lines()), report.lines()


def test_run_inside_a_skip_record_is_caught(history: History) -> None:
    """An occurrence both skipped and admitted is accounted for twice: `skip_record`."""
    schedule, first, _ = _clean_schedule(history)
    history.conn.execute("UPDATE ql3.schedule_revisions SET misfire_policy = 'skip'")
    history.conn.execute("UPDATE ql3.trigger_schedules SET misfire_policy = 'skip'")
    history.skip(schedule, first, first + SECOND, 2, acquired_at_ms=first + 4_000)
    report = history.verify()
    assert report.count("skip_record") >= 1, report.lines()
    assert any("overlaps" in line for line in report.lines()), report.lines()


def test_since_limits_the_checked_occurrences(history: History) -> None:
    """Occurrences before since_ms are not checked; later ones still are."""
    schedule, first, _ = _clean_schedule(history, count=6)
    history.forget_run(schedule, first + SECOND)
    assert history.verify().count("missing") == 1
    later = history.verify(since_ms=first + 2 * SECOND)
    assert later.ok, later.lines()
    assert (later.runs, later.expected) == (4, 4)
    assert schedule[0] == later.per_schedule[0].schedule_id


def test_checker_runs_as_admin_and_writes_nothing(history: History) -> None:
    """The checker works with ql3_admin's rights and leaves the database untouched."""
    _clean_schedule(history)

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
    first = _second(now) - 10 * SECOND
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
    first = _second(now) - 10 * SECOND
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
    schedule, first, _ = _clean_schedule(history)
    history.run(schedule, first - 300 * SECOND, first - 300 * SECOND + 5)
    report = history.verify()
    assert report.count("not_occurrence") == 1, report.lines()
