"""One retry policy, one list: the commit and admin paths rerun exactly `RETRYABLE_SQLSTATES`.

The faults are real server errors: a statement-level trigger raises a chosen SQLSTATE on the
first N statements that insert into a table (`ql3.runs` for the commit, `ql3.trigger_schedules`
for the admin), counting them with a sequence, which a rollback does not undo. Each listed
SQLSTATE is rerun by both paths, the transaction from its first statement; a code outside the
list is not rerun even in the same class; and the reruns are bounded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin
from ql3_cluster_postgres._retry import RETRYABLE_SQLSTATES, TRANSACTION_RETRY
from ql3_runtime_core import CommitStatus, RepositoryUnavailableError, ScheduleDefinition
from repo_helpers import command, decide, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

# Installed as the superuser; SECURITY DEFINER so the QL3 roles need no grant on its objects.
_INSTALL = """
CREATE SEQUENCE public.ql3_fault_calls;
CREATE TABLE public.ql3_fault (sqlstate text NOT NULL, failures integer NOT NULL);
CREATE FUNCTION public.ql3_inject_fault() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    fault record;
BEGIN
    SELECT f.sqlstate, f.failures INTO fault FROM public.ql3_fault AS f;
    IF FOUND AND nextval('public.ql3_fault_calls') <= fault.failures THEN
        RAISE EXCEPTION 'injected fault %', fault.sqlstate USING ERRCODE = fault.sqlstate;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER ql3_fault BEFORE INSERT ON ql3.runs
    FOR EACH STATEMENT EXECUTE FUNCTION public.ql3_inject_fault();
CREATE TRIGGER ql3_fault BEFORE INSERT ON ql3.trigger_schedules
    FOR EACH STATEMENT EXECUTE FUNCTION public.ql3_inject_fault();
"""
_ARM = "INSERT INTO public.ql3_fault (sqlstate, failures) VALUES (%(sqlstate)s, %(failures)s)"
# How many guarded statements ran (failed or not): is_called says whether nextval ever ran.
_CALLS = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.ql3_fault_calls"

# In class 40 like the listed codes (so the service loop would retry it later, on a new
# connection), yet not rerun in the transaction: the list is exact, not a class.
_NOT_LISTED = "40003"


def _arm(db: Ql3Database, sqlstate: str, failures: int) -> None:
    """Make the next `failures` guarded statements fail with `sqlstate`."""
    with psycopg.connect(db.superuser_dsn, autocommit=True) as conn:
        conn.execute(_INSTALL)
        conn.execute(_ARM, {"sqlstate": sqlstate, "failures": failures})


def _calls(db: Ql3Database) -> int:
    with psycopg.connect(db.superuser_dsn, autocommit=True) as conn:
        row = conn.execute(_CALLS).fetchone()
    assert row is not None
    return int(row[0])


def _commit_one(db: Ql3Database, *, max_retries: int = 8) -> tuple[int, list[str]]:
    """Claim one due schedule and commit it; return the retries reported and statements sent."""
    sent: list[str] = []
    with PostgresScheduleRepository(
        db.dsn("runtime"),
        max_serialization_retries=max_retries,
        statement_observer=lambda name, _sql, _params: sent.append(name),
    ) as repo:
        repo.read_cluster_state()  # loads the recorded zone rules (its statements not counted)
        sent.clear()
        (claim,) = repo.claim_due_schedules(command(), 1)
        sent.clear()  # the claim and the read of its zone
        batch = repo.commit_decisions([decide(claim)])
    (outcome,) = batch.outcomes
    assert outcome.status is CommitStatus.COMMITTED
    assert len(outcome.runs) >= 1
    return batch.serialization_retries, sent


def _add_schedule(db: Ql3Database) -> None:
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.add_schedule("retried", ScheduleDefinition(cron="* * * * * *"))


@pytest.mark.parametrize("sqlstate", sorted(RETRYABLE_SQLSTATES))
def test_the_commit_reruns_each_listed_sqlstate(ql3_db: Ql3Database, sqlstate: str) -> None:
    """A commit failing once with a listed SQLSTATE is sent again and commits, one retry."""
    make_schedules(ql3_db, 1)
    _arm(ql3_db, sqlstate, failures=1)
    retries, sent = _commit_one(ql3_db)
    assert retries == 1
    # The whole statement, with its one clock_timestamp() sample, went out twice.
    assert sent == ["commit_decisions", "commit_decisions"]
    assert _calls(ql3_db) == 2


@pytest.mark.parametrize("sqlstate", sorted(RETRYABLE_SQLSTATES))
def test_the_admin_reruns_each_listed_sqlstate(ql3_db: Ql3Database, sqlstate: str) -> None:
    """An admin transaction failing once with a listed SQLSTATE runs again and succeeds."""
    _arm(ql3_db, sqlstate, failures=1)
    _add_schedule(ql3_db)
    assert _calls(ql3_db) == 2


def test_a_code_outside_the_list_is_not_rerun_by_either_path(ql3_db: Ql3Database) -> None:
    """SQLSTATE 40003 (class 40, not listed) fails the commit and the admin change at once."""
    make_schedules(ql3_db, 1)
    _arm(ql3_db, _NOT_LISTED, failures=100)
    with pytest.raises(RepositoryUnavailableError, match=r"after 0 serialization retries"):
        _commit_one(ql3_db)
    assert _calls(ql3_db) == 1
    with pytest.raises(RepositoryUnavailableError, match=_NOT_LISTED):
        _add_schedule(ql3_db)
    assert _calls(ql3_db) == 2


def test_reruns_are_bounded_on_both_paths(ql3_db: Ql3Database) -> None:
    """A fault that never clears is tried retries + 1 times, then raised (commit and admin)."""
    make_schedules(ql3_db, 1)
    _arm(ql3_db, "40001", failures=100)
    with pytest.raises(RepositoryUnavailableError, match=r"after 2 serialization retries"):
        _commit_one(ql3_db, max_retries=2)
    assert _calls(ql3_db) == 3
    with pytest.raises(RepositoryUnavailableError, match="40001"):
        _add_schedule(ql3_db)
    assert _calls(ql3_db) == 3 + TRANSACTION_RETRY.retries + 1
