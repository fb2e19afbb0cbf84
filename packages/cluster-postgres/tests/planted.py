"""A real history to plant defects in, and the `copy_of` fixture that clones a database for it.

`real_history` writes a history only through the production paths: ScheduleAdmin creates the
schedules, the repository claims and commits them as a Coordinator cycle does (one claim per
schedule, the decision from `ql3_runtime_core`), and WorkerIngress takes, fails, retries and
finishes attempts. Cursors are moved into the past (as the owner) only before anything is
decided, so each schedule starts with an outage its misfire policy must handle.

A planted-defect test then copies that database (`CREATE DATABASE ... TEMPLATE`), plants exactly
one defect as the schema owner, and requires verify to report exactly that finding, while the
unmodified copy must pass (the clean control).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from ingress_helpers import take
from ql3_cluster_postgres import PostgresScheduleRepository, WorkerIngress, verify_history
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    CommitStatus,
    MisfirePolicy,
    TaskExecution,
)
from ql3_testkit import drop_database, prepare_ql3_database
from repo_helpers import command, db_now_ms, decide, fetch, make_schedules, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ql3_cluster_postgres import VerifyReport
    from ql3_testkit import Ql3Database, ThrowawayCluster

# The Coordinator's claim lease in this history, and so the allowance verify judges with: the
# smallest a claim may have, so a defect of a second or two is beyond it.
LEASE_MS = 1_000
MINUTE = 60_000
# Retries one second after a failure: long enough to plant a retry that came too early.
RETRIED = TaskExecution(command="true", max_attempts=3, timeout_ms=60_000, retry_backoff_ms=1_000)


@dataclass(frozen=True)
class History:
    """What `real_history` wrote: the schedule id per role, and when it was done (`as_of_ms`)."""

    db: Ql3Database
    fire_once: int  # every second, grace 0, a minute down: a skip record and the latest run
    skip: int  # every second, grace 0, a minute down: one skip record, no run
    catch_up: int  # every second, grace 0, a minute down: sixty runs from one claim
    on_time: int  # skip, grace 5 s, 3 s down: runs on time, no skip record
    worked: int  # catch_up, 3 s down: runs a worker executed, one failed and retried
    retried_run: int  # the run of `worked` whose first attempt failed
    as_of_ms: int  # database time once everything was decided (before any worker)

    def verify(self, db: Ql3Database | None = None, **options: Any) -> VerifyReport:
        """Verify `db` (default: this history's own) with the time rules on, as of `as_of_ms`."""
        target = db or self.db
        return verify_history(
            target.dsn("admin"),
            stale_claim_grace_ms=0,
            lease_ms=LEASE_MS,
            as_of_ms=self.as_of_ms,
            **options,
        )


def real_history(db: Ql3Database) -> History:
    """Write the history described at the top; return what a test needs to plant in it."""
    ids = {
        "fire_once": _schedule(db, "fo", MisfirePolicy.FIRE_ONCE, 0, MINUTE),
        "skip": _schedule(db, "sk", MisfirePolicy.SKIP, 0, MINUTE),
        "catch_up": _schedule(db, "cu", MisfirePolicy.CATCH_UP, 0, MINUTE),
        "on_time": _schedule(db, "ot", MisfirePolicy.SKIP, 5_000, 3_000),
        "worked": _schedule(db, "wk", MisfirePolicy.CATCH_UP, 0, 3_000, RETRIED),
    }
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(lease_ms=LEASE_MS), 16)
        assert len(claims) == len(ids)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}
    as_of_ms = db_now_ms(db.dsn("admin"))
    return History(db=db, retried_run=_work(db), as_of_ms=as_of_ms, **ids)


def _schedule(  # noqa: PLR0917 - one schedule per line of real_history reads best as a row
    db: Ql3Database,
    prefix: str,
    policy: MisfirePolicy,
    grace_ms: int,
    down_ms: int,
    execution: TaskExecution | None = None,
) -> int:
    # A Python task (no command) is never taken by a command worker: only `worked` is executed.
    (schedule_id,) = make_schedules(
        db,
        1,
        policy=policy,
        grace_ms=grace_ms,
        shift_back_ms=down_ms,
        prefix=prefix,
        execution=execution,
    )
    return schedule_id


def _work(db: Ql3Database) -> int:
    """Execute `worked`'s runs: the first fails once and succeeds on its retry; its run id."""
    token = uuid4()
    succeeded = AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)
    with WorkerIngress(db.dsn("worker_ingress")) as ingress:
        first, *others = take(ingress, token, limit=16)
        failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        finish = ingress.finish_attempt(first.attempt_id, token, failed)
        assert finish.recorded
        for attempt in others:
            assert ingress.finish_attempt(attempt.attempt_id, token, succeeded).recorded
        ((not_before,),) = fetch(
            db.dsn("admin"),
            "SELECT not_before_ms FROM ql3.attempts WHERE run_id = %s AND attempt_number = 2",
            (first.run_id,),
        )
        wait_until(lambda: db_now_ms(db.dsn("admin")) >= not_before, what="the retry is due")
        (retry,) = take(ingress, token)
        assert retry.run_id == first.run_id
        assert ingress.finish_attempt(retry.attempt_id, token, succeeded).recorded
    return first.run_id


@pytest.fixture
def copy_of(pg_cluster: ThrowawayCluster) -> Iterator[Callable[[Ql3Database], Ql3Database]]:
    """Give a function that clones a QL3 database (no session may be open on it); drop clones."""
    copies: list[str] = []

    def clone(source: Ql3Database) -> Ql3Database:
        name = f"ql3_copy_{uuid.uuid4().hex[:12]}"
        copies.append(name)
        return prepare_ql3_database(pg_cluster, name, template=source.name)

    yield clone
    for name in copies:
        drop_database(pg_cluster, name)
