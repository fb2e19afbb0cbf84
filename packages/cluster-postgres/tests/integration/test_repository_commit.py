"""The fenced commit (DESIGN §5, §6), release, uncertainty, the next-due hint, as ql3_runtime."""

from __future__ import annotations

import threading
from importlib import resources
from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
import pytest
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    CommitStatus,
    RepositoryUnavailableError,
    ScheduleState,
)
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    history_counts,
    make_schedules,
    owner_conn,
    wait_until,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_commit_writes_run_attempt_two_events_and_cursor_at_one_sample(
    ql3_db: Ql3Database,
) -> None:
    """A fenced commit writes 1 run, 1 attempt, 2 events per occurrence, all at its sample."""
    make_schedules(ql3_db, 2, shift_back_ms=2000)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        commits = [decide(claim) for claim in repo.claim_due_schedules(command(), 16)]
        batch = repo.commit_decisions(commits)
    assert batch.serialization_retries == 0
    admitted = [run for outcome in batch.outcomes for run in outcome.runs]
    occurrences = sum(len(commit.decision.occurrences) for commit in commits)
    assert len(admitted) == occurrences >= 4
    assert history_counts(ql3_db) == (occurrences, occurrences, 2 * occurrences)
    sample = batch.outcomes[0].committed_at_ms
    assert {outcome.committed_at_ms for outcome in batch.outcomes} == {sample}
    assert {run.created_at_ms for run in admitted} == {sample}
    times = fetch(
        dsn,
        "SELECT (SELECT array_agg(DISTINCT created_at_ms) FROM ql3.runs),"
        " (SELECT array_agg(DISTINCT created_at_ms) || array_agg(DISTINCT updated_at_ms)"
        "  FROM ql3.attempts), (SELECT array_agg(DISTINCT created_at_ms) FROM ql3.events),"
        " (SELECT array_agg(DISTINCT updated_at_ms) FROM ql3.trigger_schedules)",
    )[0]
    assert all(set(column) == {sample} for column in times)
    kinds = fetch(dsn, "SELECT run_id, attempt_id, kind FROM ql3.events ORDER BY id")
    assert [kind for _, _, kind in kinds[:2]] == ["run.admitted", "attempt.queued"]
    rows = fetch(dsn, "SELECT id, claim_token, next_due_at_ms FROM ql3.trigger_schedules")
    cursors = {commit.claim.schedule_id: commit.decision.next_due_at_ms for commit in commits}
    assert {(sid, token, due) for sid, token, due in rows} == {
        (sid, None, cursor) for sid, cursor in cursors.items()
    }


def test_each_claim_is_fenced_on_its_own(ql3_db: Ql3Database) -> None:
    """One transaction, two claims: the expired one races (nothing written), the other commits."""
    make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (short,) = repo.claim_due_schedules(command(lease_ms=1000), 1)
        (long,) = repo.claim_due_schedules(command(lease_ms=30_000), 1)
        wait_until(lambda: db_now_ms(dsn) >= short.claim_expires_at_ms, what="short expiry")
        batch = repo.commit_decisions([decide(short), decide(long)])
        status = {outcome.schedule_id: outcome.status for outcome in batch.outcomes}
        assert status == {
            short.schedule_id: CommitStatus.RACED,
            long.schedule_id: CommitStatus.COMMITTED,
        }
        runs = fetch(dsn, "SELECT DISTINCT schedule_id FROM ql3.runs")
        assert runs == [(long.schedule_id,)]
        raced_row = fetch(
            dsn,
            "SELECT claim_token, version FROM ql3.trigger_schedules WHERE id = %s",
            (short.schedule_id,),
        )
        assert raced_row == [(short.claim_token, short.version)]
        # Identities were allocated only for the fenced admission: the next run id follows on.
        last_id = max(run.run_id for run in batch.outcomes[1].runs)
        (again,) = repo.claim_due_schedules(command(), 1)
        assert again.schedule_id == short.schedule_id
        later = repo.commit_decisions([decide(again)])
    assert later.outcomes[0].runs[0].run_id == last_id + 1


def test_notifications_only_for_fenced_admissions(ql3_db: Ql3Database) -> None:
    """ql3_run_admitted carries exactly the run ids that passed the fence."""
    make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with psycopg.connect(dsn, autocommit=True) as listener, PostgresScheduleRepository(dsn) as repo:
        listener.execute("LISTEN ql3_run_admitted")
        (short,) = repo.claim_due_schedules(command(lease_ms=1000), 1)
        (long,) = repo.claim_due_schedules(command(), 1)
        wait_until(lambda: db_now_ms(dsn) >= short.claim_expires_at_ms, what="short expiry")
        batch = repo.commit_decisions([decide(short), decide(long)])
        expected = {str(run.run_id) for outcome in batch.outcomes for run in outcome.runs}
        got = {n.payload for n in listener.notifies(timeout=2.0, stop_after=len(expected))}
    assert got == expected
    assert expected


def test_serialization_failure_is_retried_with_a_fresh_sample(ql3_db: Ql3Database) -> None:
    """A concurrent write to the claimed row makes the commit hit 40001; the retry counts it."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo, owner_conn(ql3_db) as other:
        (claim,) = repo.claim_due_schedules(command(), 1)
        other.execute("BEGIN")
        other.execute(
            "UPDATE ql3.trigger_schedules SET version = version + 1 WHERE id = %s",
            (claim.schedule_id,),
        )
        result: list[object] = []
        worker = threading.Thread(
            target=lambda: result.append(repo.commit_decisions([decide(claim)]))
        )
        worker.start()
        _wait_for_lock_wait(ql3_db)
        other.execute("COMMIT")
        worker.join(30)
    (batch,) = result
    assert batch.serialization_retries == 1  # type: ignore[attr-defined]
    assert batch.outcomes[0].status is CommitStatus.RACED  # type: ignore[attr-defined]
    assert history_counts(ql3_db) == (0, 0, 0)


def test_serialization_retries_are_bounded(ql3_db: Ql3Database) -> None:
    """With no retries allowed, a 40001 surfaces as RepositoryUnavailableError, not psycopg's."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with (
        PostgresScheduleRepository(dsn, max_serialization_retries=0) as repo,
        owner_conn(ql3_db) as other,
    ):
        (claim,) = repo.claim_due_schedules(command(), 1)
        other.execute("BEGIN")
        other.execute(
            "UPDATE ql3.trigger_schedules SET version = version + 1 WHERE id = %s",
            (claim.schedule_id,),
        )
        errors: list[BaseException] = []

        def commit() -> None:
            try:
                repo.commit_decisions([decide(claim)])
            except RepositoryUnavailableError as exc:
                errors.append(exc)

        worker = threading.Thread(target=commit)
        worker.start()
        _wait_for_lock_wait(ql3_db)
        other.execute("COMMIT")
        worker.join(30)
        assert len(errors) == 1
        assert "40001" in str(errors[0])
        assert repo.database_now_ms() > 0  # the repository recovers its connection


def test_release_clears_exact_claims_and_wakes_others(ql3_db: Ql3Database) -> None:
    """Release clears only claims whose grant stands, at database time, and notifies others.

    The grant is owner, token, acquired time and expiry (`same_grant`): a claim whose row's
    version moved under it (an admin change) is still released; a forged token or another
    grant's acquired time is not.
    """
    make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo, PostgresScheduleRepository(dsn) as other:
        first, second = repo.claim_due_schedules(command(), 2)
        forged = first.model_copy(update={"claim_token": uuid4()})
        assert repo.release_claims([forged]) == 0
        regranted = first.model_copy(
            update={"claim_acquired_at_ms": first.claim_acquired_at_ms - 1}
        )
        assert repo.release_claims([regranted]) == 0
        assert other.wait_for_wakeup(0.05) is False
        stale = first.model_copy(update={"version": first.version - 1})
        assert repo.release_claims([stale, second]) == 2
        assert other.wait_for_wakeup(5.0) is True
        rows = fetch(dsn, "SELECT claim_token, version, updated_at_ms FROM ql3.trigger_schedules")
        assert all(token is None for token, _, _ in rows)
        assert {version for _, version, _ in rows} == {first.version + 1}
        assert all(updated >= first.claim_acquired_at_ms for _, _, updated in rows)
        assert len(other.claim_due_schedules(command("b"), 16)) == 2


def test_next_due_hint_follows_the_database_clock(ql3_db: Ql3Database) -> None:
    """None without schedules, 0 when due, the wait to the cursor or to a held claim's expiry."""
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        assert repo.next_due_in_ms() is None
        make_schedules(ql3_db, 1, prefix="due")
        assert repo.next_due_in_ms() == 0
        (claim,) = repo.claim_due_schedules(command(lease_ms=20_000), 1)
        hint = repo.next_due_in_ms()
        assert hint is not None
        assert 15_000 < hint <= 20_000
        make_schedules(ql3_db, 1, prefix="hourly", cron="0 * * * *", shift_back_ms=0)
        hint = repo.next_due_in_ms()
        assert hint is not None
        assert hint <= min(20_000, 3_600_000)
        repo.release_claims([claim])
        assert repo.next_due_in_ms() == 0


def _wait_for_lock_wait(db: Ql3Database) -> None:
    """Wait until some backend waits for a lock (the commit blocked on the row)."""
    wait_until(
        lambda: bool(fetch(db.dsn("owner"), "SELECT 1 FROM pg_locks WHERE NOT granted")),
        what="commit blocked on the row lock",
    )


def test_commit_reaches_schedule_rows_by_tid_only(ql3_db: Ql3Database) -> None:
    """On a small table too, the commit plan touches trigger_schedules only through a TID scan."""
    make_schedules(ql3_db, 20)
    with owner_conn(ql3_db) as conn:
        conn.execute("ANALYZE ql3.trigger_schedules")
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        commits = [decide(claim) for claim in repo.claim_due_schedules(command(), 16)]
        params = repo._commit_params(commits)
        conn = repo._connection()
        conn.autocommit = False
        conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        sql = resources.files("ql3_cluster_postgres").joinpath("sql/commit_decisions.sql")
        plan = [row[0] for row in conn.execute("EXPLAIN " + sql.read_text(), params).fetchall()]
        conn.rollback()
    scans = [line.strip() for line in plan if "Scan" in line and "trigger_schedules" in line]
    assert scans, plan
    assert all(line.startswith("->  Tid Scan") for line in scans), scans


def test_commit_of_the_last_occurrence_exhausts_the_schedule(ql3_db: Ql3Database) -> None:
    """A decision past end_at_ms clears the cursor and marks the schedule exhausted for good."""
    (sid,) = make_schedules(ql3_db, 1)
    with owner_conn(ql3_db) as conn:
        conn.execute(
            "UPDATE ql3.trigger_schedules SET end_at_ms = next_due_at_ms WHERE id = %s", (sid,)
        )
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        assert commit.decision.state is ScheduleState.EXHAUSTED
        outcome = repo.commit_decisions([commit]).outcomes[0]
        assert outcome.status is CommitStatus.COMMITTED
        assert len(outcome.runs) == 1
        assert repo.claim_due_schedules(command(), 1) == []
        assert repo.next_due_in_ms() is None
    assert fetch(
        ql3_db.dsn("runtime"), "SELECT state, next_due_at_ms FROM ql3.trigger_schedules"
    ) == [("exhausted", None)]


def test_a_commit_stuck_behind_a_row_lock_fails_retryably(ql3_db: Ql3Database) -> None:
    """lock_timeout turns a wait behind another transaction into RepositoryUnavailableError."""
    make_schedules(ql3_db, 1)
    with (
        PostgresScheduleRepository(ql3_db.dsn("runtime"), lock_timeout_ms=300) as repo,
        owner_conn(ql3_db) as other,
    ):
        (claim,) = repo.claim_due_schedules(command(), 1)
        other.execute("BEGIN")
        other.execute(
            "UPDATE ql3.trigger_schedules SET version = version WHERE id = %s",
            (claim.schedule_id,),
        )
        with pytest.raises(RepositoryUnavailableError, match="55P03"):
            repo.commit_decisions([decide(claim)])
        other.execute("ROLLBACK")
        assert repo.commit_decisions([decide(claim)]).outcomes[0].status is CommitStatus.COMMITTED


def test_an_orphaned_repository_transaction_is_ended_by_the_server(ql3_db: Ql3Database) -> None:
    """A repository session left inside a transaction is ended by the server, freeing its locks."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with (
        PostgresScheduleRepository(dsn, idle_in_transaction_timeout_ms=500) as orphan,
        PostgresScheduleRepository(dsn) as repo,
    ):
        (claim,) = repo.claim_due_schedules(command(), 1)
        stuck = orphan._connection()
        stuck.autocommit = False
        stuck.execute(
            "UPDATE ql3.trigger_schedules SET version = version WHERE id = %s",
            (claim.schedule_id,),
        )
        # As if the orphan's client vanished before COMMIT: it never sends another byte.
        outcome = repo.commit_decisions([decide(claim)]).outcomes[0]
        assert outcome.status is CommitStatus.COMMITTED
        with pytest.raises(RepositoryUnavailableError):
            orphan.database_now_ms()
        assert orphan.database_now_ms() >= claim.claim_acquired_at_ms
