"""`ql3 verify`'s `overlap` rule on a real history, with each defect planted in a copy of it.

The history is written through the production paths: the repository admits three due occurrences
of an every-second `skip` schedule (cap 1) in one commit, as a Coordinator would; a worker takes
the first and finishes it, takes the second, and while that one runs the take skips the third
(attempt `skipped`, skip record of reason overlap); then the second finishes. Verify and the test
kit's oracle find it clean, the skipped occurrence accounted for once. Defects are planted in
copies of that database as the schema owner; the unmodified copy is the clean control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import uuid4

from ingress_helpers import take
from planted import copy_of
from ql3_cluster_postgres import PostgresScheduleRepository, WorkerIngress, verify_history
from ql3_runtime_core import AttemptOutcome, AttemptResult, OverlapPolicy, TaskExecution
from repo_helpers import command, decide, fetch, make_schedules, owner_conn
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here

SKIP_ONE = TaskExecution(
    command="true", max_attempts=1, timeout_ms=60_000, overlap=OverlapPolicy.SKIP
)
_DONE = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)


def _history(db: Ql3Database) -> list[int]:
    """Two Runs executed one after the other, the third skipped for overlap; their run ids."""
    make_schedules(db, 1, prefix="lone", shift_back_ms=3_000, execution=SKIP_ONE)
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim, budget=3)])
    run_ids = sorted(run.run_id for outcome in batch.outcomes for run in outcome.runs)
    assert len(run_ids) == 3
    with WorkerIngress(db.dsn("worker_ingress")) as ingress:
        for expected in run_ids[:2]:
            token = uuid4()
            (attempt,) = take(ingress, token, limit=1)
            assert attempt.run_id == expected
            if expected == run_ids[1]:
                assert take(ingress, uuid4(), limit=1) == []  # the third: skipped
            assert ingress.finish_attempt(attempt.attempt_id, token, _DONE).recorded
    states = fetch(
        db.dsn("admin"),
        "SELECT a.state FROM ql3.attempts AS a ORDER BY a.run_id",
    )
    assert states == [("succeeded",), ("succeeded",), ("skipped",)]
    return run_ids


def _planted(copy: Ql3Database, statement: str, params: Any = None) -> VerifyReport:
    with owner_conn(copy) as owner:
        assert owner.execute(statement, params).rowcount >= 1
    return verify_history(copy.dsn("admin"))


def test_an_overlap_skip_is_accounted_once_and_verified_clean(ql3_db: Ql3Database) -> None:
    """Verify and the oracle agree: clean; every occurrence once; one skipped for overlap."""
    _history(ql3_db)
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    assert report.overlap_skipped == 1
    (verdict,) = report.per_schedule
    assert (verdict.missing, verdict.duplicated) == (0, 0)
    assert verdict.admitted == report.runs == 3


def test_planted_overlap_defects_are_reported(
    ql3_db: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """Each defect is reported by the overlap rule; the clean copy passes."""
    first, second, third = _history(ql3_db)
    clean = verify_history(copy_of(ql3_db).dsn("admin"))
    assert clean.ok, clean.lines()

    # Two overlapping attempts: the first still executing when the second started.
    overlapping = _planted(
        copy_of(ql3_db),
        "UPDATE ql3.attempts SET finished_at_ms = (SELECT started_at_ms + 1 FROM ql3.attempts"
        " WHERE run_id = %(second)s) WHERE run_id = %(first)s",
        {"first": first, "second": second},
    )
    assert set(overlapping.violation_counts) == {"overlap"}, overlapping.lines()
    (found,) = overlapping.violations
    assert f"run {second} started" in found.detail
    assert "2 at once, its max_running is 1" in found.detail

    # A skip without its record.
    unrecorded = _planted(
        copy_of(ql3_db), "DELETE FROM ql3.skipped_occurrences WHERE reason = 'overlap'"
    )
    assert set(unrecorded.violation_counts) == {"overlap"}, unrecorded.lines()
    assert f"run {third} at" in unrecorded.violations[0].detail
    assert "no overlap skip record" in unrecorded.violations[0].detail

    # A record whose Run executed: the skipped attempt rewritten as a success.
    executed = _planted(
        copy_of(ql3_db),
        "UPDATE ql3.attempts SET started_at_ms = finished_at_ms, state = 'succeeded'"
        " WHERE run_id = %(third)s",
        {"third": third},
    )
    assert "overlap" in executed.violation_counts, executed.lines()
    assert any("which a worker started" in v.detail for v in executed.violations)

    # A record with no Run: the skipped Run and its attempt removed.
    runless = _planted(
        copy_of(ql3_db),
        "WITH gone AS (DELETE FROM ql3.attempts WHERE run_id = %(third)s)"
        " DELETE FROM ql3.runs WHERE id = %(third)s",
        {"third": third},
    )
    assert {"overlap", "missing"} <= set(runless.violation_counts), runless.lines()
    assert any("has no cron run" in v.detail for v in runless.violations)
