"""Every occurrence accounted for in the commit (DESIGN §7), as ql3_runtime.

Skip records are written by the commit statement itself, for fenced claims only; an occurrence
that already has a run is settled by that run instead of failing the batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres import DatabaseError, PostgresScheduleRepository
from ql3_runtime_core import CommitStatus, MisfirePolicy
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    history_counts,
    make_schedules,
    owner_conn,
    plant_run,
    wait_until,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

_SKIP_COLUMNS = (
    "SELECT schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, misfire_policy,"
    " claim_acquired_at_ms, owner_id, claim_token, lateness_newest_ms, lateness_oldest_ms,"
    " created_at_ms FROM ql3.skipped_occurrences ORDER BY schedule_id"
)


def test_commit_records_the_skipped_range_at_its_own_sample(ql3_db: Ql3Database) -> None:
    """A decision that skips writes one skip record per claim: range, count, claim, lateness."""
    ids = make_schedules(ql3_db, 2, policy=MisfirePolicy.SKIP, grace_ms=1_000, shift_back_ms=20_000)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        commits = [decide(claim) for claim in repo.claim_due_schedules(command(), 16)]
        batch = repo.commit_decisions(commits)
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
    sample = batch.outcomes[0].committed_at_ms
    rows = fetch(ql3_db.dsn("admin"), _SKIP_COLUMNS)
    assert [row[0] for row in rows] == ids
    for row, commit in zip(rows, sorted(commits, key=lambda c: c.claim.schedule_id), strict=True):
        claim, decision = commit.claim, commit.decision
        assert decision.skipped >= 18
        assert row[1:5] == (
            decision.skipped_first_ms,
            decision.skipped_last_ms,
            decision.skipped,
            "skip",
        )
        assert row[5:8] == (claim.claim_acquired_at_ms, claim.owner_id, claim.claim_token)
        assert decision.skipped_first_ms is not None
        assert decision.skipped_last_ms is not None
        assert row[8] == claim.claim_acquired_at_ms - decision.skipped_last_ms
        assert row[9] == claim.claim_acquired_at_ms - decision.skipped_first_ms
        assert row[10] == sample


def test_raced_claim_and_nothing_skipped_write_no_skip_record(ql3_db: Ql3Database) -> None:
    """Only fenced claims whose decision skipped something leave a skip record."""
    make_schedules(ql3_db, 2, policy=MisfirePolicy.SKIP, grace_ms=1_000, shift_back_ms=20_000)
    make_schedules(ql3_db, 1, prefix="on-time", policy=MisfirePolicy.SKIP, shift_back_ms=2_000)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (short,) = repo.claim_due_schedules(command(lease_ms=1000), 1)
        claims = repo.claim_due_schedules(command(), 16)
        wait_until(lambda: db_now_ms(dsn) >= short.claim_expires_at_ms, what="short expiry")
        commits = [decide(short), *(decide(claim) for claim in claims)]
        batch = repo.commit_decisions(commits)
    status = {outcome.schedule_id: outcome.status for outcome in batch.outcomes}
    assert status[short.schedule_id] is CommitStatus.RACED
    skipping = {c.claim.schedule_id for c in commits[1:] if c.decision.skipped > 0}
    assert len(skipping) == 1
    rows = fetch(ql3_db.dsn("admin"), "SELECT schedule_id FROM ql3.skipped_occurrences")
    assert {row[0] for row in rows} == skipping


def test_an_occurrence_already_admitted_is_settled_not_failed(ql3_db: Ql3Database) -> None:
    """A decided occurrence that already has a run is not admitted again; the batch commits."""
    first, second = make_schedules(ql3_db, 2, shift_back_ms=4_000)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo, psycopg.connect(dsn, autocommit=True) as listen:
        listen.execute("LISTEN ql3_run_admitted")
        commits = {
            c.claim.schedule_id: c for c in map(decide, repo.claim_due_schedules(command(), 16))
        }
        taken = commits[first].decision.occurrences[1]
        with owner_conn(ql3_db) as owner:
            plant_run(owner, first, taken, "earlier")
        try:
            batch = repo.commit_decisions(list(commits.values()))
        except DatabaseError as exc:
            # The promise under test is that this call succeeds: a run already durable for
            # one occurrence settles it. Failing the batch (a unique violation on the run's
            # occurrence, say) is the defect, so it is a failed expectation, not a crash.
            pytest.fail(f"the batch failed instead of settling the admitted occurrence: {exc}")
        notified = {n.payload for n in listen.notifies(timeout=2.0, stop_after=64)}
    outcomes = {outcome.schedule_id: outcome for outcome in batch.outcomes}
    assert {o.status for o in outcomes.values()} == {CommitStatus.COMMITTED}
    assert outcomes[first].already_admitted == (taken,)
    assert taken not in {run.scheduled_for_ms for run in outcomes[first].runs}
    assert outcomes[second].already_admitted == ()
    admitted = [run for outcome in outcomes.values() for run in outcome.runs]
    decided = sum(len(c.decision.occurrences) for c in commits.values())
    assert len(admitted) == decided - 1
    assert notified == {str(run.run_id) for run in admitted}
    runs, attempts, events = history_counts(ql3_db)
    assert (runs, attempts, events) == (decided, decided - 1, 2 * (decided - 1))
    cursor = fetch(dsn, "SELECT next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s", (first,))
    assert cursor == [(commits[first].decision.next_due_at_ms,)]


def test_resolving_a_commit_whose_occurrences_all_had_runs(ql3_db: Ql3Database) -> None:
    """An uncertain commit that wrote no run of its own is settled by its moved schedule row."""
    (schedule,) = make_schedules(ql3_db, 1, shift_back_ms=1_500)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        commit = decide(claim)
        with owner_conn(ql3_db) as owner:
            for at in commit.decision.occurrences:
                plant_run(owner, schedule, at, "earlier")
        (outcome,) = repo.commit_decisions([commit]).outcomes
        resolved = repo.resolve_uncertain_commit(commit)
    assert outcome.runs == resolved.runs == ()
    assert outcome.already_admitted == resolved.already_admitted == commit.decision.occurrences
    assert resolved.status is CommitStatus.COMMITTED
