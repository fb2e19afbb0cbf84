"""HistoryReader: the demo's reads of the admitted history, typed and read by column name."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit, rows, take
from ql3_cluster_postgres import (
    HistoryReader,
    PostgresScheduleRepository,
    RunRecord,
    WorkerIngress,
)
from ql3_runtime_core import AttemptOutcome, AttemptResult, CommitStatus, QL3Error
from repo_helpers import command, db_now_ms, decide, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_an_empty_history_reads_as_nothing(ql3_db: Ql3Database) -> None:
    """Without runs or claims the reader reports none, and the clock is the database's."""
    ids = make_schedules(ql3_db, 2)
    with HistoryReader(ql3_db.superuser_dsn) as history:
        before = db_now_ms(ql3_db.superuser_dsn)
        now = history.database_now_ms()
        assert history.admissions_by_owner() == {}
        assert history.runs(ids) == ()
        assert history.claims_held(ids) == 0
    assert before <= now <= db_now_ms(ql3_db.superuser_dsn)


def test_runs_claims_and_owners_follow_what_the_repository_did(ql3_db: Ql3Database) -> None:
    """Claims held count until committed; each run reads back with 1 attempt and 2 events."""
    ids = make_schedules(ql3_db, 2)
    with (
        PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo,
        HistoryReader(ql3_db.dsn("admin")) as history,
    ):
        claims = repo.claim_due_schedules(command("replica-1"), 16)
        assert history.claims_held(ids) == 2
        batch = repo.commit_decisions([decide(claim) for claim in claims])
        assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
        admitted = [run for outcome in batch.outcomes for run in outcome.runs]
        runs = history.runs(ids)
        assert history.claims_held(ids) == 0
        assert history.admissions_by_owner() == {"replica-1": len(admitted)}
        assert history.runs(ids[:1]) == tuple(r for r in runs if r.schedule_id == ids[0])
    expected = sorted(
        (run.schedule_id, run.scheduled_for_ms, run.created_at_ms, run.owner_id) for run in admitted
    )
    assert [(r.schedule_id, r.scheduled_for_ms, r.created_at_ms, r.owner_id) for r in runs] == (
        expected
    )
    assert all(isinstance(r, RunRecord) and (r.attempts, r.events) == (1, 2) for r in runs)
    assert {(r.succeeded, r.live) for r in runs} == {(0, 1)}  # queued, nobody executed them


def test_runs_tell_what_a_worker_executed(ql3_db: Ql3Database) -> None:
    """A run taken is live; once its attempt succeeded it reads 1 succeeded, none live, 4 events."""
    admit(ql3_db, 2)
    ids = [r["id"] for r in rows(ql3_db.dsn("admin"), "SELECT id FROM ql3.trigger_schedules")]
    token = uuid4()
    done = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0, output_tail="")
    with (
        WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress,
        HistoryReader(ql3_db.dsn("admin")) as history,
    ):
        first, second = take(ingress, token)
        assert ingress.finish_attempt(first.attempt_id, token, done).recorded
        shapes = {(r.attempts, r.events, r.succeeded, r.live) for r in history.runs(sorted(ids))}
    # run.admitted, attempt.queued, attempt.running (+ attempt.succeeded once it ended)
    assert shapes == {(1, 4, 1, 0), (1, 3, 0, 1)}
    assert second.attempt_id != first.attempt_id


def test_the_reader_never_writes(ql3_db: Ql3Database) -> None:
    """Its sessions are read-only, whatever role it is given (the superuser here)."""
    with HistoryReader(ql3_db.superuser_dsn) as history:
        history.database_now_ms()
        conn = history._conn  # private: the session the reader opened, to probe it
        assert conn is not None
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE ql3.never (id int)")


def test_an_unreachable_database_is_a_ql3_error_naming_the_read(ql3_db: Ql3Database) -> None:
    """A failed connection raises a QL3 error that says which read failed."""
    dsn = ql3_db.superuser_dsn + " port=1 connect_timeout=2"
    with HistoryReader(dsn) as history, pytest.raises(QL3Error, match="history: runs: connect"):
        history.runs([1])


def test_each_admitted_runs_events_read_in_id_order_tell_admitted_then_queued(
    ql3_db: Ql3Database,
) -> None:
    """One commit of 256 runs writes each run's two events in the order they happened.

    A reader (`ql3 runs show`, the verify rules, an operator's SQL) orders a run's events by id;
    the commit writes `run.admitted` before `attempt.queued` for every run of a large batch (a
    sort that only orders by run would leave the two in whatever order its ties fall).
    """
    make_schedules(ql3_db, 1, shift_back_ms=300_000)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        (outcome,) = repo.commit_decisions([decide(claim, budget=256)]).outcomes
    run_ids = sorted(run.run_id for run in outcome.runs)
    events = rows(
        ql3_db.dsn("admin"),
        "SELECT run_id, kind FROM ql3.events WHERE run_id = ANY(%s) ORDER BY id",
        (run_ids,),
    )
    by_run: dict[int, list[str]] = {}
    for event in events:
        by_run.setdefault(event["run_id"], []).append(event["kind"])
    assert len(run_ids) == 256
    assert sorted(by_run) == run_ids
    disordered = {run: kinds for run, kinds in by_run.items() if kinds != _ADMITTED_THEN_QUEUED}
    assert disordered == {}


_ADMITTED_THEN_QUEUED = ["run.admitted", "attempt.queued"]
