"""Uncertainty (DESIGN §6), as ql3_runtime: a commit of unknown fate is resolved from the rows.

A lost COMMIT reply is UNCERTAIN and resolved once the database answers again; a connection lost
before COMMIT, or a server that cannot be reached, is RepositoryUnavailableError (nothing written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres import ConnectionSettings, PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimCommit,
    CommitStatus,
    RepositoryUnavailableError,
    ScheduleDecision,
    ScheduleState,
    zone_rules_version,
)
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    history_counts,
    make_schedules,
    owner_conn,
    proxy_in_front_of,
    through,
    wait_until,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_resolve_after_a_landed_commit_reports_committed(ql3_db: Ql3Database) -> None:
    """Resolving a commit that landed rebuilds the same runs and admits nothing new."""
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        batch = repo.commit_decisions([commit])
        counts = history_counts(ql3_db)
        resolved = repo.resolve_uncertain_commit(commit)
    assert resolved.status is CommitStatus.COMMITTED
    assert resolved.runs == batch.outcomes[0].runs
    assert resolved.committed_at_ms == batch.outcomes[0].committed_at_ms
    assert history_counts(ql3_db) == counts


def test_resolve_after_a_retry_names_each_run_with_its_first_attempt(ql3_db: Ql3Database) -> None:
    """A landed commit is rebuilt from its runs and their first attempts, even after a retry.

    Once a first attempt failed and its successor was queued, a run has two attempts; the
    resolution still reports each run once, with the attempt the commit wrote.
    """
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        (landed,) = repo.commit_decisions([commit]).outcomes
        with owner_conn(ql3_db) as owner:
            owner.execute(
                "UPDATE ql3.attempts SET state = 'failed', finished_at_ms = updated_at_ms"
            )
            owner.execute(
                "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms,"
                " updated_at_ms) SELECT run_id, 2, 'queued', updated_at_ms, updated_at_ms"
                " FROM ql3.attempts"
            )
        resolved = repo.resolve_uncertain_commit(commit)
    assert len(landed.runs) == len(commit.decision.occurrences) > 0
    assert resolved.runs == landed.runs


def test_resolve_when_the_claim_still_stands_commits_once(ql3_db: Ql3Database) -> None:
    """A commit that never landed is committed by the resolution, exactly once."""
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        resolved = repo.resolve_uncertain_commit(commit)
        again = repo.resolve_uncertain_commit(commit)
    assert resolved.status is CommitStatus.COMMITTED
    assert again.status is CommitStatus.COMMITTED
    assert again.runs == resolved.runs
    occurrences = len(commit.decision.occurrences)
    assert history_counts(ql3_db) == (occurrences, occurrences, 2 * occurrences)


def test_resolve_after_takeover_reports_raced(ql3_db: Ql3Database) -> None:
    """If the claim expired and another owner took the schedule, the resolution is raced."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo, PostgresScheduleRepository(dsn) as other:
        (claim,) = repo.claim_due_schedules(command(lease_ms=1000), 1)
        wait_until(lambda: db_now_ms(dsn) >= claim.claim_expires_at_ms, what="expiry")
        assert len(other.claim_due_schedules(command("b"), 1)) == 1
        resolved = repo.resolve_uncertain_commit(decide(claim))
    assert resolved.status is CommitStatus.RACED
    assert history_counts(ql3_db) == (0, 0, 0)


def test_resolve_a_decision_admitting_nothing(ql3_db: Ql3Database) -> None:
    """With no occurrence, the moved cursor and version show whether the commit landed."""
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        empty = ClaimCommit(
            claim=claim,
            decision=ScheduleDecision(
                schedule_id=claim.schedule_id,
                occurrences=(),
                next_due_at_ms=claim.next_due_at_ms + 1000,
                state=ScheduleState.ACTIVE,
                observed_at_ms=claim.claim_acquired_at_ms,
            ),
            zone_rules_version=zone_rules_version(),
        )
        assert repo.commit_decisions([empty]).outcomes[0].status is CommitStatus.COMMITTED
        resolved = repo.resolve_uncertain_commit(empty)
    assert resolved.status is CommitStatus.COMMITTED
    assert history_counts(ql3_db) == (0, 0, 0)


def test_lost_commit_reply_is_uncertain_then_resolved(ql3_db: Ql3Database) -> None:
    """A swallowed COMMIT reply yields UNCERTAIN; resolution finds the durable run, no duplicate."""
    make_schedules(ql3_db, 2)
    dsn = ql3_db.dsn("runtime")
    with (
        proxy_in_front_of(dsn) as proxy,
        PostgresScheduleRepository(through(proxy, dsn)) as faulty,
        PostgresScheduleRepository(dsn) as healthy,
    ):
        (short,) = faulty.claim_due_schedules(command(lease_ms=1000), 1)
        (claim,) = faulty.claim_due_schedules(command(), 1)
        wait_until(lambda: db_now_ms(dsn) >= short.claim_expires_at_ms, what="short expiry")
        commits = [decide(short), decide(claim)]
        proxy.drop_next_commit_reply()
        batch = faulty.commit_decisions(commits)
        assert [o.status for o in batch.outcomes] == [CommitStatus.RACED, CommitStatus.UNCERTAIN]
        resolved = healthy.resolve_uncertain_commit(commits[1])
    assert resolved.status is CommitStatus.COMMITTED
    occurrences = len(commits[1].decision.occurrences)
    assert history_counts(ql3_db) == (occurrences, occurrences, 2 * occurrences)
    assert [run.scheduled_for_ms for run in resolved.runs] == list(commits[1].decision.occurrences)


def test_connection_lost_before_commit_is_unavailable(ql3_db: Ql3Database) -> None:
    """A connection reset before COMMIT raises RepositoryUnavailableError; nothing is written."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with (
        proxy_in_front_of(dsn) as proxy,
        PostgresScheduleRepository(through(proxy, dsn)) as repo,
    ):
        (claim,) = repo.claim_due_schedules(command(), 1)
        proxy.reset_connections()
        with pytest.raises(RepositoryUnavailableError):
            repo.commit_decisions([decide(claim)])
        assert history_counts(ql3_db) == (0, 0, 0)
        outcome = repo.commit_decisions([decide(claim)]).outcomes[0]
    assert outcome.status is CommitStatus.COMMITTED


def test_unreachable_server_raises_repository_unavailable(ql3_db: Ql3Database) -> None:
    """No psycopg class escapes: a refused connection is RepositoryUnavailableError."""
    dsn = psycopg.conninfo.make_conninfo(ql3_db.dsn("runtime"), port="1")
    with (
        PostgresScheduleRepository(dsn, connection=ConnectionSettings(connect_timeout_s=2)) as repo,
        pytest.raises(RepositoryUnavailableError, match="connect"),
    ):
        repo.claim_due_schedules(command(), 1)
