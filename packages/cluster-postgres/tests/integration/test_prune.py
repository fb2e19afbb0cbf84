"""History retention (`prune_history`, migration 0012) keeps what `ql3 verify` proves.

A real history is written through the production paths (the repository claims and commits as a
Coordinator cycle does, WorkerIngress takes and finishes the attempts), then the faketime
cluster's DATABASE clock is moved two hours on, so the history is old by the only clock QL3
trusts; nothing reads a node clock. Pruning then removes it in batches, each with its checkpoint,
and verify must still pass; planted defects on copies (rows deleted past the function, a count
altered, the chain broken, a checkpoint dropped) must each be reported by rule `checkpoint`.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from ingress_helpers import take
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    WorkerIngress,
    parse_duration_ms,
    prune_history,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    CommitStatus,
    InvalidArgumentError,
    MisfirePolicy,
    TaskExecution,
)
from ql3_testkit import drop_database, oracle_verdict, prepare_ql3_database
from repo_helpers import command, decide, fetch, make_schedules, owner_conn
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database, ThrowawayCluster

HOUR = 3_600_000
# Short attempts, so the refusal bound (lease + grace + retry span) stays about two minutes.
EXECUTION = TaskExecution(command="true", max_attempts=2, timeout_ms=5_000, retry_backoff_ms=0)
SUCCEEDED = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)


def _write(db: Ql3Database, *, work: bool = True) -> dict[str, int]:
    """Three schedules twelve seconds down, decided by one Coordinator cycle; run by a worker."""
    ids = {
        name: make_schedules(
            db, 1, policy=policy, grace_ms=0, shift_back_ms=12_000, prefix=name, execution=EXECUTION
        )[0]
        for name, policy in (
            ("cu", MisfirePolicy.CATCH_UP),
            ("fo", MisfirePolicy.FIRE_ONCE),
            ("sk", MisfirePolicy.SKIP),
        )
    }
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(lease_ms=1_000), 16)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
    if work:
        token = uuid.uuid4()
        with WorkerIngress(db.dsn("worker_ingress")) as ingress:
            for attempt in take(ingress, token, limit=100):
                assert ingress.finish_attempt(attempt.attempt_id, token, SUCCEEDED).recorded
    return ids


def _counts(db: Ql3Database) -> dict[str, int]:
    ((runs, attempts, events, skips, checkpoints),) = fetch(
        db.dsn("admin"),
        "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.attempts),"
        " (SELECT count(*) FROM ql3.events), (SELECT count(*) FROM ql3.skipped_occurrences),"
        " (SELECT count(*) FROM ql3.history_checkpoints)",
    )
    return {
        "runs": runs,
        "attempts": attempts,
        "events": events,
        "skips": skips,
        "checkpoints": checkpoints,
    }


def _verify(db: Ql3Database) -> VerifyReport:
    """Verify, and require the test kit's oracle to agree (it reads the checkpoints itself)."""
    # No lease: the stall rule would judge the two hours the clock was moved on.
    return checked_verify(db.dsn("admin"), stale_claim_grace_ms=0)


def _oracle_kinds(db: Ql3Database) -> set[str]:
    return set(oracle_verdict(db.dsn("admin"), stale_claim_grace_ms=0).kinds())


def _only(report: VerifyReport, *rules: str) -> list[str]:
    assert set(report.violation_counts) == set(rules), report.lines()
    return [violation.detail for violation in report.violations]


@pytest.fixture
def aged(faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster) -> dict[str, int]:
    """Write a real history, then move the database clock two hours on; the schedule ids."""
    ids = _write(faketime_db)
    assert _verify(faketime_db).ok
    faketime_cluster.set_clock_offset_ms(2 * HOUR)
    return ids


@pytest.fixture
def fake_copy(faketime_cluster: ThrowawayCluster) -> Iterator[Callable[[Ql3Database], Ql3Database]]:
    """Clone a database of the faketime cluster (no session may be open on it); drop clones."""
    names: list[str] = []

    def clone(source: Ql3Database) -> Ql3Database:
        name = f"ql3_pcopy_{uuid.uuid4().hex[:12]}"
        names.append(name)
        return prepare_ql3_database(faketime_cluster, name, template=source.name)

    yield clone
    for name in names:
        drop_database(faketime_cluster, name)


def test_prune_removes_old_history_in_batches_and_verify_still_passes(
    faketime_db: Ql3Database, aged: dict[str, int]
) -> None:
    """Everything decided goes, batch by batch, each with a chained checkpoint; verify passes."""
    before = _counts(faketime_db)
    assert before["runs"] >= 12
    report = prune_history(faketime_db.dsn("admin"), older_than_ms=parse_duration_ms("1h"), batch=5)
    after = _counts(faketime_db)
    assert report.runs == before["runs"]
    assert (after["runs"], after["attempts"], after["events"], after["skips"]) == (0, 0, 0, 0)
    assert after["checkpoints"] == len(report.checkpoints) >= 5
    # The catch_up schedule's dozen runs took three batches of at most five; chained 1..n.
    seqs = [item.seq for item in report.checkpoints if item.schedule_id == aged["cu"]]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) >= 3
    assert all(item.runs <= 5 for item in report.checkpoints)
    # The boundary stops at each cursor: nothing undecided is history.
    assert {item.clipped_by for item in report.checkpoints if not item.more} == {"cursor"}
    rows = fetch(
        faketime_db.dsn("admin"),
        "SELECT c.schedule_id, c.seq, c.previous_hash, lag(c.hash) OVER w,"
        " c.covered_from_ms, lag(c.covered_below_ms) OVER w"
        " FROM ql3.history_checkpoints AS c WINDOW w AS (PARTITION BY schedule_id ORDER BY seq)",
    )
    for _, _, previous, prior, start, prior_end in rows:
        assert (previous, start) == (prior, prior_end)
    assert _verify(faketime_db).ok
    # Nothing is left to prune: a second prune writes nothing.
    again = prune_history(faketime_db.dsn("admin"), older_than_ms=HOUR)
    assert again.checkpoints == ()
    assert _counts(faketime_db) == after


def test_checkpoint_rule_finds_each_planted_defect(
    faketime_db: Ql3Database,
    aged: dict[str, int],
    fake_copy: Callable[[Ql3Database], Ql3Database],
) -> None:
    """Rows deleted without a checkpoint, a count altered, a chain broken or cut: each reported."""
    unpruned = fake_copy(faketime_db)
    with owner_conn(unpruned) as owner, owner.transaction():
        # The three oldest Runs of catch_up, as a careless DELETE would remove them.
        for statement in (
            (
                "DELETE FROM ql3.events WHERE run_id IN (SELECT id FROM ql3.runs"
                " WHERE schedule_id = %(cu)s ORDER BY scheduled_for_ms LIMIT 3)"
            ),
            (
                "DELETE FROM ql3.attempts WHERE run_id IN (SELECT id FROM ql3.runs"
                " WHERE schedule_id = %(cu)s ORDER BY scheduled_for_ms LIMIT 3)"
            ),
            (
                "DELETE FROM ql3.runs WHERE id IN (SELECT id FROM ql3.runs"
                " WHERE schedule_id = %(cu)s ORDER BY scheduled_for_ms LIMIT 3)"
            ),
        ):
            owner.execute(statement.encode(), aged)
    details = _only(_verify(unpruned), "checkpoint", "missing")
    assert any("no checkpoint covers them" in detail for detail in details)

    prune_history(faketime_db.dsn("admin"), older_than_ms=HOUR, batch=5)
    clean = fake_copy(faketime_db)
    assert _verify(clean).ok  # the clean control: a pruned copy passes every rule

    plants = {
        "count": "UPDATE ql3.history_checkpoints SET runs_by_kind = jsonb_set(runs_by_kind,"
        " '{cron}', to_jsonb((runs_by_kind->>'cron')::bigint + 1)) WHERE schedule_id = %(cu)s"
        " AND seq = 1",
        "chain": "UPDATE ql3.history_checkpoints SET previous_hash = sha256('forged')"
        " WHERE schedule_id = %(cu)s AND seq = 2",
        "cut": "DELETE FROM ql3.history_checkpoints WHERE schedule_id = %(cu)s AND seq = 2",
    }
    expected = {
        "count": "account for",
        "chain": "the chain is broken",
        "cut": "a gap in the chain",
    }
    for name, statement in plants.items():
        copy = fake_copy(faketime_db)
        with owner_conn(copy) as owner:
            owner.execute(statement.encode(), aged)
        details = _only(_verify(copy), "checkpoint")
        assert any(expected[name] in detail for detail in details), (name, details)
        assert "checkpoint" in _oracle_kinds(copy), name


def test_too_short_a_duration_and_bad_text_are_refused(ql3_db: Ql3Database) -> None:
    """Below the lease + grace + retry span, or not `<n>d|h|m|s`: refused, naming the flag."""
    with pytest.raises(InvalidArgumentError) as refused:
        prune_history(ql3_db.dsn("admin"), older_than_ms=parse_duration_ms("1m"))
    assert refused.value.argument == "--older-than"
    assert "at least" in str(refused.value)
    for text in ("3w", "12", "1.5h", "-5h", "h", "", "10 d"):
        with pytest.raises(InvalidArgumentError) as bad:
            parse_duration_ms(text)
        assert bad.value.argument == "--older-than"
    assert [parse_duration_ms(text) for text in ("30d", "12h", "90m", "45s")] == [
        30 * 86_400_000,
        12 * HOUR,
        90 * 60_000,
        45_000,
    ]
    with pytest.raises(InvalidArgumentError) as batch:
        prune_history(ql3_db.dsn("admin"), older_than_ms=HOUR, batch=0)
    assert batch.value.argument == "--batch"
    # The function itself refuses too, whoever calls it (22023 naming its argument).
    with (
        psycopg.connect(ql3_db.dsn("admin"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InvalidParameterValue, match="older_than_ms"),
    ):
        conn.execute("SELECT * FROM ql3.admin_prune_history_v1(60000, 10, false)")


def test_a_dry_run_writes_nothing(faketime_db: Ql3Database, aged: dict[str, int]) -> None:
    """A dry run says what it would remove, per schedule, and changes no row."""
    before = _counts(faketime_db)
    report = prune_history(faketime_db.dsn("admin"), older_than_ms=HOUR, dry_run=True)
    assert report.dry_run
    assert report.runs == before["runs"]
    assert {item.schedule_id for item in report.checkpoints} == set(aged.values())
    assert all(item.seq is None for item in report.checkpoints)
    assert _counts(faketime_db) == before


@pytest.mark.usefixtures("aged")
def test_a_crash_in_or_between_batches_leaves_a_chain_a_rerun_completes(
    faketime_db: Ql3Database,
) -> None:
    """A batch is one transaction: a crash inside undoes it, one after it keeps it whole."""
    before = _counts(faketime_db)
    # Crash inside a batch: the transaction that called the function never commits.
    conn = psycopg.connect(faketime_db.dsn("admin"))
    conn.execute("SELECT * FROM ql3.admin_prune_history_v1(%s, 5, false)", (HOUR,))
    conn.close()
    assert _counts(faketime_db) == before
    # Crash between batches: the first committed, then the pruner stopped.
    first = prune_history(faketime_db.dsn("admin"), older_than_ms=HOUR, batch=5, max_batches=1)
    assert first.batches == 1
    middle = _counts(faketime_db)
    assert 0 < middle["runs"] < before["runs"]
    assert _verify(faketime_db).ok  # a partly pruned history is proven too
    rest = prune_history(faketime_db.dsn("admin"), older_than_ms=HOUR, batch=5)
    assert first.runs + rest.runs == before["runs"]
    assert _counts(faketime_db)["runs"] == 0
    assert _verify(faketime_db).ok


def test_prune_racing_a_commit_and_a_finish_removes_nothing_live(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A claim open, an attempt running while prune runs: their occurrences stay, verify passes."""
    ids = _write(faketime_db, work=False)
    faketime_cluster.set_clock_offset_ms(2 * HOUR)
    dsn = faketime_db.dsn("admin")
    token = uuid.uuid4()
    with (
        WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress,
        PostgresScheduleRepository(faketime_db.dsn("runtime")) as repo,
    ):
        # One attempt finishes while the prune runs; the other runs until the prune is over.
        finished, held = take(ingress, token, limit=2)
        claims = repo.claim_due_schedules(command(lease_ms=30_000), 16)
        assert {claim.schedule_id for claim in claims} == set(ids.values())
        reports: list[Any] = []
        pruner = threading.Thread(
            target=lambda: reports.append(prune_history(dsn, older_than_ms=HOUR, batch=1))
        )
        pruner.start()
        batch = repo.commit_decisions([decide(claim) for claim in claims])
        assert ingress.finish_attempt(finished.attempt_id, token, SUCCEEDED).recorded
        pruner.join()
        (report,) = reports
        # The attempt still running: its Run, attempt and events all kept.
        ((runs, attempts),) = fetch(
            dsn,
            "SELECT (SELECT count(*) FROM ql3.runs WHERE id = %(run)s),"
            " (SELECT count(*) FROM ql3.attempts WHERE id = %(attempt)s AND state = 'running')",
            {"run": held.run_id, "attempt": held.attempt_id},
        )
        assert (runs, attempts) == (1, 1)
        assert ingress.finish_attempt(held.attempt_id, token, SUCCEEDED).recorded
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
    # Every attempt kept its Run: nothing was removed from under a worker or a commit.
    ((orphans,),) = fetch(
        dsn,
        "SELECT count(*) FROM ql3.attempts AS a WHERE NOT EXISTS"
        " (SELECT 1 FROM ql3.runs AS r WHERE r.id = a.run_id)",
    )
    assert orphans == 0
    assert any(item.clipped_by is not None for item in report.checkpoints)
    assert _verify(faketime_db).ok
