"""Pause with a reason, resume with a replay choice, auto-resume at until (DESIGN §7).

Every span here is real: the database clock is moved forward with libfaketime (`faketime_db`)
while a schedule is paused, and the history is read back exactly: the recorded span, the one
`paused` skip record (first, last, count) and the cursor the resume left, for each replay. The
schedules fire every second in UTC, so the expected occurrences are whole seconds: plain
arithmetic, no cron engine.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit_due, take
from ql3_cluster_postgres import (
    PauseRequest,
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    ScheduleStateError,
    WorkerIngress,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    InvalidArgumentError,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
)
from repo_helpers import command, decide, fetch, make_schedules, wait_until
from verify_compare import checked_verify

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

NAME = "s00000"


def _skips(db: Ql3Database) -> list[tuple[Any, ...]]:
    return fetch(
        db.dsn("owner"),
        "SELECT reason, first_skipped_ms, last_skipped_ms, skipped_count, pause_id"
        " FROM ql3.skipped_occurrences ORDER BY id",
    )


def _cursor(db: Ql3Database) -> tuple[str, int | None]:
    ((state, cursor),) = fetch(
        db.dsn("owner"), "SELECT state, next_due_at_ms FROM ql3.trigger_schedules"
    )
    return state, cursor


def _cron_runs(db: Ql3Database) -> list[int]:
    rows = fetch(
        db.dsn("owner"),
        "SELECT scheduled_for_ms FROM ql3.runs WHERE kind = 'cron' ORDER BY scheduled_for_ms",
    )
    return [row[0] for row in rows]


def _paused_for(db: Ql3Database, cluster: ThrowawayCluster, seconds: int) -> int:
    """Pause the one schedule, let `seconds` pass on the database clock; return its cursor."""
    with ScheduleAdmin(db.dsn("admin")) as admin:
        record = admin.pause(NAME, reason="deploy freeze")
    assert record.state.value == "paused"
    assert record.next_due_at_ms is not None
    cluster.set_clock_offset_ms(seconds * 1000)
    return record.next_due_at_ms


@pytest.mark.parametrize("replay", ["skip", "fire_once", "catch_up"])
def test_resume_records_the_span_and_its_occurrences_by_replay(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster, replay: str
) -> None:
    """skip: all recorded `paused`; fire_once: all but the latest; catch_up: none, cursor kept."""
    make_schedules(faketime_db, 1, shift_back_ms=0)
    held = _paused_for(faketime_db, faketime_cluster, 6)
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        record = admin.resume(NAME, replay=replay)
        (span,) = admin.pauses(NAME)
    login = fetch(faketime_db.dsn("admin"), "SELECT session_user")[0][0]
    assert (span.paused_by, span.resumed_by, span.reason) == (login, login, "deploy freeze")
    assert span.first_held_ms == held
    assert (span.replay, span.automatic, span.cause) == (replay, False, "admin")
    # The span ends at the database time the resume read after locking the row.
    assert span.end_ms is not None
    assert span.resumed_at_ms is not None
    assert span.paused_at_ms < span.end_ms <= span.resumed_at_ms
    last = span.end_ms // 1000 * 1000  # the latest occurrence at or before the span's end
    assert last - held >= 4_000  # the span held several occurrences back
    if replay == "skip":
        expected = [("paused", held, last, (last - held) // 1000 + 1, span.pause_id)]
        cursor = last + 1000
    elif replay == "fire_once":
        expected = [("paused", held, last - 1000, (last - held) // 1000, span.pause_id)]
        cursor = last
    else:
        expected, cursor = [], held
    assert _skips(faketime_db) == expected
    assert span.skipped_count == sum(row[3] for row in expected)
    assert (record.state.value, record.next_due_at_ms) == ("active", cursor)
    assert _cursor(faketime_db) == ("active", cursor)
    # What the replay handed back is the Coordinator's to decide: fire_once admits the latest,
    # catch_up the first held. After skip nothing of the span is due: the first occurrence
    # after it at most, if the database clock has reached it by now (a loaded machine).
    admitted = admit_due(faketime_db)
    runs = _cron_runs(faketime_db)
    assert len(admitted) == len(runs)
    if replay == "skip":
        assert runs in ([], [cursor]), runs
    else:
        assert runs == [cursor]
    report = checked_verify(faketime_db.dsn("admin"))
    assert report.ok, report.lines()


def test_an_until_ends_the_span_by_itself_replaying_nothing(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A duration until is added to the database clock; once passed, a replica resumes it."""
    make_schedules(faketime_db, 1, shift_back_ms=0)
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.pause(NAME, reason="maintenance", until_after_ms=3_000)
        (span,) = admin.pauses(NAME)
    assert span.until_ms == span.paused_at_ms + 3_000
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as repo:
        repo.read_cluster_state()  # loads the recorded zone rules, as a replica connecting
        assert repo.resume_expired_pauses() == 0
        assert _cursor(faketime_db)[0] == "paused"
        faketime_cluster.set_clock_offset_ms(8_000)
        assert repo.resume_expired_pauses() == 1
        assert repo.resume_expired_pauses() == 0
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        (span,) = admin.pauses(NAME)
    assert (span.automatic, span.replay, span.end_ms) == (True, "skip", span.until_ms)
    held, until = span.first_held_ms, span.until_ms
    assert held is not None
    assert until is not None
    last = until // 1000 * 1000
    assert _skips(faketime_db) == [("paused", held, last, (last - held) // 1000 + 1, span.pause_id)]
    # The cursor is the first occurrence after the until; the time since is the policy's.
    assert _cursor(faketime_db) == ("active", last + 1000)


def test_replicas_racing_one_expired_span_write_one_resume(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Four replicas probe at once: one resume, one skip record, the others find it closed."""
    make_schedules(faketime_db, 1, shift_back_ms=0)
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.pause(NAME, until_after_ms=2_000)
    faketime_cluster.set_clock_offset_ms(5_000)
    repos = [PostgresScheduleRepository(faketime_db.dsn("runtime")) for _ in range(4)]
    for repo in repos:
        repo.read_cluster_state()  # loads the recorded zone rules
    barrier = threading.Barrier(len(repos))
    counts: list[int] = []

    def probe(repo: PostgresScheduleRepository) -> None:
        barrier.wait()
        counts.append(repo.resume_expired_pauses())

    threads = [threading.Thread(target=probe, args=(repo,)) for repo in repos]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for repo in repos:
        repo.close()
    assert sorted(counts) == [0, 0, 0, 1]
    assert len(_skips(faketime_db)) == 1
    closed = fetch(
        faketime_db.dsn("owner"),
        "SELECT count(*) FROM ql3.schedule_pauses WHERE resumed_at_ms IS NOT NULL",
    )
    assert closed == [(1,)]


def test_bad_until_is_refused_by_name_and_writes_nothing(ql3_db: Ql3Database) -> None:
    """An until not after the database time, or a reason too long: typed errors, nothing written."""
    make_schedules(ql3_db, 1, shift_back_ms=0)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        now = admin.database_now_ms()
        with pytest.raises(InvalidArgumentError) as caught:
            admin.pause(NAME, until_ms=now - 1)
        assert caught.value.argument == "until"
        with pytest.raises(InvalidArgumentError) as caught:
            admin.pause(NAME, reason="x" * 501)
        assert caught.value.argument == "reason"
        with pytest.raises(InvalidArgumentError) as caught:
            admin.resume(NAME, replay="all")
        assert caught.value.argument == "replay"
        assert admin.pauses(NAME) == []
        assert admin.get_schedule(NAME).state.value == "active"
        admin.retire(NAME)
        with pytest.raises(ScheduleStateError):
            admin.pause(NAME)
    assert fetch(ql3_db.dsn("owner"), "SELECT count(*) FROM ql3.schedule_pauses") == [(0,)]


def test_a_pause_racing_a_commit_never_records_an_admitted_occurrence(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A claim held across the pause cannot commit (raced); the span starts at its cursor."""
    make_schedules(faketime_db, 1, shift_back_ms=3_000, policy=MisfirePolicy.CATCH_UP)
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
            admin.pause(NAME)
        batch = repo.commit_decisions([decide(claim)])
        assert batch.outcomes[0].status.value == "raced"
    faketime_cluster.set_clock_offset_ms(3_000)
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.resume(NAME, replay="skip")
        (span,) = admin.pauses(NAME)
    assert span.first_held_ms == claim.next_due_at_ms
    runs = _cron_runs(faketime_db)
    ((_, first, last, _, _),) = _skips(faketime_db)
    assert runs == []
    assert first == claim.next_due_at_ms
    # And the other order: a commit that lands first moves the cursor the pause then keeps.
    # The raced claim stands until its lease (30 s) ends by the database clock.
    faketime_cluster.set_clock_offset_ms(40_000)
    admitted = admit_due(faketime_db)
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.pause(NAME)
        spans = admin.pauses(NAME)
    runs = _cron_runs(faketime_db)
    assert len(admitted) == len(runs) == 1
    assert spans[-1].first_held_ms == runs[-1] + 1000
    assert all(not first <= run <= last for run in runs)


def test_consecutive_failed_runs_pause_the_schedule_by_the_database(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Two failed Runs in a row (attempts exhausted) pause it; a success between resets it."""
    once = TaskExecution(command="false", max_attempts=1, timeout_ms=60_000)
    spec = ScheduleSpec(
        name=NAME,
        definition=ScheduleDefinition(cron="* * * * * *"),
        execution=once,
        pause_after_failures=2,
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
    faketime_cluster.set_clock_offset_ms(6_000)

    def run_one(outcome: AttemptOutcome) -> int:
        (run_id,) = admit_due(faketime_db)
        token = uuid4()
        with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
            (attempt,) = take(ingress, token)
            assert attempt.run_id == run_id
            result = AttemptResult(
                outcome=outcome, exit_code=0 if outcome is AttemptOutcome.SUCCEEDED else 1
            )
            assert ingress.finish_attempt(attempt.attempt_id, token, result).recorded
        return run_id

    run_one(AttemptOutcome.FAILED)
    run_one(AttemptOutcome.SUCCEEDED)
    run_one(AttemptOutcome.FAILED)
    assert _cursor(faketime_db)[0] == "active"
    last = run_one(AttemptOutcome.FAILED)
    assert _cursor(faketime_db)[0] == "paused"
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        (span,) = admin.pauses(NAME)
    assert (span.cause, span.failure_threshold, span.last_failed_run_id) == ("failures", 2, last)
    assert span.reason == f"2 consecutive failed runs, last run {last}"
    assert span.open
    # Paused: nothing more is admitted, though occurrences keep falling due.
    assert admit_due(faketime_db) == []


def _lock_waiters(db: Ql3Database, expected: int) -> bool:
    """Whether exactly `expected` sessions of `db` wait on a lock (read as superuser)."""
    ((count,),) = fetch(
        db.superuser_dsn,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    return int(count) == expected


def test_a_failure_committed_after_the_pause_it_raced_is_not_counted_against_it(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A failure that read the clock before the pause but committed after it is not counted.

    Two failures queue behind one schedule lock; the first pauses, the second reads the clock
    earlier but commits later. The span names the Run its trigger counted, and verify (and the
    oracle) accept the history: counting back from the named Run, not from the pause.
    """
    once = TaskExecution(command="false", max_attempts=1, timeout_ms=60_000)
    spec = ScheduleSpec(
        name=NAME,
        definition=ScheduleDefinition(cron="* * * * * *"),
        execution=once,
        pause_after_failures=2,
    )
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
    faketime_cluster.set_clock_offset_ms(6_000)
    runs = [run for _ in range(3) for run in admit_due(faketime_db)]
    token = uuid4()
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        attempts = sorted(take(ingress, token), key=lambda a: a.run_id)
    assert [a.run_id for a in attempts] == runs
    failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
    with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
        assert ingress.finish_attempt(attempts[0].attempt_id, token, failed).recorded
    owner = faketime_db.dsn("owner")

    def finish(attempt_id: int) -> None:
        with WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress:
            assert ingress.finish_attempt(attempt_id, token, failed).recorded

    with psycopg.connect(owner) as lock:
        lock.execute("SELECT 1 FROM ql3.trigger_schedules FOR UPDATE")
        threads = []
        for attempt in attempts[1:]:
            thread = threading.Thread(target=finish, args=(attempt.attempt_id,))
            thread.start()
            threads.append(thread)
            # Each queues behind the ones before it, in this order.
            wait_until(partial(_lock_waiters, faketime_db, len(threads)), what="finish queued")
        lock.commit()
    for thread in threads:
        thread.join()
    with ScheduleAdmin(faketime_db.dsn("admin")) as admin:
        (span,) = admin.pauses(NAME)
    assert (span.cause, span.last_failed_run_id) == ("failures", runs[1])
    # The fault happened: the third failure's clock reading is before the pause it lost to.
    ((third_at,),) = fetch(
        owner, "SELECT updated_at_ms FROM ql3.attempts WHERE id = %s", (attempts[2].attempt_id,)
    )
    assert third_at < span.paused_at_ms
    report = checked_verify(faketime_db.dsn("admin"))
    assert report.ok, report.lines()


def test_a_declared_pause_is_applied_once_and_an_ended_one_not(ql3_db: Ql3Database) -> None:
    """Apply pauses an active schedule once; applied again, nothing more; an until passed: none."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        now = admin.database_now_ms()
        later = PauseRequest(reason="declared", until_ms=now + 3_600_000)
        specs = [
            ScheduleSpec(
                name="held", definition=ScheduleDefinition(cron="0 3 * * *"), paused=later
            ),
            ScheduleSpec(
                name="over",
                definition=ScheduleDefinition(cron="0 3 * * *"),
                paused=PauseRequest(reason="ended", until_ms=now - 1),
            ),
        ]
        admin.apply_schedules(specs)
        admin.apply_schedules(specs)
        (span,) = admin.pauses("held")
        assert (span.reason, span.until_ms, span.open) == ("declared", now + 3_600_000, True)
        assert admin.pauses("over") == []
        states = {record.name: record.state.value for record in admin.list_schedules()}
    assert states == {"held": "paused", "over": "active"}


def test_retiring_a_paused_schedule_closes_its_span(ql3_db: Ql3Database) -> None:
    """Retired while paused: the span ends, recording nothing; brought back, verify is clean."""
    spec = ScheduleSpec(name=NAME, definition=ScheduleDefinition(cron="* * * * * *"))
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.apply_schedules([spec])
        admin.pause(NAME, reason="going away")
        admin.retire(NAME)
        (span,) = admin.pauses(NAME)
        assert (span.open, span.skipped_count, span.replay) == (False, 0, "skip")
        admin.apply_schedules([spec])
        assert admin.get_schedule(NAME).state.value == "active"
    records = fetch(
        ql3_db.dsn("owner"), "SELECT count(*) FROM ql3.skipped_occurrences WHERE reason = 'paused'"
    )
    assert records == [(0,)]
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
