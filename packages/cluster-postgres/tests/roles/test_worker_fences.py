"""What a worker login may write, and what it may not, with two real worker logins over TCP.

`ql3_worker_ingress` writes attempts and events only through the functions of migration 0007,
which bind a lease to the login that took it, enforce the attempt state machine and take every
time from the database clock. Worker A holds a running attempt (`a1`) and ended another as
failed (`b1`, whose retry `b2` waits out its backoff); worker B is a second login of the same
role that knows A's lease token (tokens are readable by every worker login). Each forbidden
write must be refused, by a missing privilege, by a refused argument (SQLSTATE 22023), or by a
fence that writes nothing; each allowed one must write. Every probe runs in a transaction that
is rolled back, and compares the attempts and events it can read before and after.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import psycopg
import pytest
from ingress_helpers import admit
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from ql3_cluster_postgres import WorkerIngress, create_login_user
from ql3_runtime_core import AttemptOutcome, AttemptResult, TaskExecution
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database, prepare_ql3_database

if TYPE_CHECKING:
    from collections.abc import Iterator

WORKER_B: Final = "ql3_login_worker_b"
WORKER_B_PASSWORD: Final = uuid.uuid4().hex
# A retry waits a minute: b2 stays queued and not yet eligible while the probes run.
EXECUTION: Final = TaskExecution(
    command="true", max_attempts=3, timeout_ms=60_000, retry_backoff_ms=60_000
)

PRIVILEGE: Final = "no privilege"
ARGUMENT: Final = "argument refused"
FENCED: Final = "fenced: nothing written"

_FINISH = "SELECT * FROM ql3.worker_finish_attempt_v1(%(a1)s, %(token_a)s, {state}, 0, '')"
_APPEND = "SELECT * FROM ql3.worker_append_event_v1(%(run_a)s, %(a1)s, %(token_a)s, {kind}, '{{}}')"
_TAKE = (
    "SELECT * FROM ql3.worker_take_attempts_v2('b', gen_random_uuid(), {lease}, 10, '{{}}', true)"
)


@dataclass(frozen=True)
class Probe:
    """One write attempt: what it tries, as which login, the SQL, and how it must end."""

    what: str
    login: str
    sql: str
    expect: str


# The writes the review found a worker login could make (and a few more of the same kinds).
FORBIDDEN: Final = (
    # Schema 9: a take through v1 would start a Run without its schedule's overlap decision.
    Probe(
        "take through the function that skips the overlap decision",
        "b",
        "SELECT * FROM ql3.worker_take_attempts_v1('b', gen_random_uuid(), 30000, 10, '{}', true)",
        PRIVILEGE,
    ),
    Probe(
        "insert an attempt that already succeeded",
        "b",
        "INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)"
        " VALUES (%(run_b)s, 3, 'succeeded', 0, 0)",
        PRIVILEGE,
    ),
    Probe(
        "insert an attempt dated at epoch 0",
        "a",
        "INSERT INTO ql3.attempts (run_id, attempt_number, state, not_before_ms, created_at_ms,"
        " updated_at_ms) VALUES (%(run_b)s, 3, 'queued', 0, 0, 0)",
        PRIVILEGE,
    ),
    Probe(
        "rewrite a failed attempt as succeeded",
        "a",
        "UPDATE ql3.attempts SET state = 'succeeded', exit_code = 0 WHERE id = %(b1)s",
        PRIVILEGE,
    ),
    Probe(
        "move an attempt's start backwards",
        "a",
        "UPDATE ql3.attempts SET started_at_ms = 0 WHERE id = %(a1)s",
        PRIVILEGE,
    ),
    Probe(
        "move a finish time backwards",
        "a",
        "UPDATE ql3.attempts SET finished_at_ms = created_at_ms WHERE id = %(b1)s",
        PRIVILEGE,
    ),
    Probe(
        "start a retry before its backoff by hand",
        "a",
        "UPDATE ql3.attempts SET not_before_ms = created_at_ms WHERE id = %(b2)s",
        PRIVILEGE,
    ),
    Probe(
        "extend another worker's lease by hand",
        "b",
        "UPDATE ql3.attempts SET lease_expires_at_ms = lease_expires_at_ms + 3600000"
        " WHERE id = %(a1)s",
        PRIVILEGE,
    ),
    Probe(
        "take over another worker's attempt by hand",
        "b",
        "UPDATE ql3.attempts SET worker_id = 'b', lease_token = gen_random_uuid()"
        " WHERE id = %(a1)s",
        PRIVILEGE,
    ),
    Probe(
        "finish another worker's attempt by hand",
        "b",
        "UPDATE ql3.attempts SET state = 'succeeded' WHERE id = %(a1)s",
        PRIVILEGE,
    ),
    Probe(
        "append any event to any run",
        "b",
        "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
        " VALUES (%(run_b)s, %(b1)s, 'attempt.succeeded', 0)",
        PRIVILEGE,
    ),
    Probe(
        "rewrite an event",
        "a",
        "UPDATE ql3.events SET kind = 'attempt.succeeded' WHERE attempt_id = %(b1)s",
        PRIVILEGE,
    ),
    Probe(
        "delete a run's events",
        "a",
        "DELETE FROM ql3.events WHERE run_id = %(run_a)s",
        PRIVILEGE,
    ),
    Probe(
        "finish another worker's attempt with its token",
        "b",
        _FINISH.format(state="'succeeded'"),
        FENCED,
    ),
    Probe(
        "renew another worker's lease with its token",
        "b",
        "SELECT * FROM ql3.worker_renew_leases_v1(%(token_a)s, ARRAY[%(a1)s]::bigint[], 60000)",
        FENCED,
    ),
    Probe(
        "release another worker's attempt with its token",
        "b",
        "SELECT * FROM ql3.worker_release_attempts_v1('worker-a', %(token_a)s,"
        " ARRAY[%(a1)s]::bigint[])",
        FENCED,
    ),
    Probe(
        "append an event to another worker's attempt with its token",
        "b",
        _APPEND.format(kind="'task.note'"),
        FENCED,
    ),
    Probe(
        "rewrite its own failed attempt as succeeded through the finish",
        "a",
        "SELECT * FROM ql3.worker_finish_attempt_v1(%(b1)s, %(token_a)s, 'succeeded', 0, '')",
        FENCED,
    ),
    Probe(
        "abandon an attempt whose lease has not expired",
        "b",
        "SELECT * FROM ql3.worker_abandon_expired_attempts_v1(10)",
        FENCED,
    ),
    Probe(
        "take a command task without saying it runs commands",
        "b",
        "SELECT * FROM ql3.worker_take_attempts_v2('b', gen_random_uuid(), 30000, 10, '{}', NULL)",
        FENCED,
    ),
    Probe(
        "append an event to its attempt under another run",
        "a",
        "SELECT * FROM ql3.worker_append_event_v1(%(run_b)s, %(a1)s, %(token_a)s, 'task.note',"
        " '{}')",
        FENCED,
    ),
    Probe(
        "finish its attempt into a state that is not an end",
        "a",
        _FINISH.format(state="'queued'"),
        ARGUMENT,
    ),
    Probe(
        "record its own attempt abandoned",
        "a",
        _FINISH.format(state="'abandoned'"),
        ARGUMENT,
    ),
    Probe(
        "append an event of the attempt's own story",
        "a",
        _APPEND.format(kind="'attempt.succeeded'"),
        ARGUMENT,
    ),
    Probe(
        "append a run event",
        "a",
        _APPEND.format(kind="'run.admitted'"),
        ARGUMENT,
    ),
    Probe(
        "take under a lease ending in an hour",
        "b",
        _TAKE.format(lease="3600000"),
        ARGUMENT,
    ),
    Probe(
        "take under a lease ending before it starts",
        "b",
        _TAKE.format(lease="-1"),
        ARGUMENT,
    ),
    Probe(
        "a Coordinator login takes attempts",
        "runtime",
        _TAKE.format(lease="30000"),
        PRIVILEGE,
    ),
    Probe(
        "an admin login finishes an attempt",
        "admin",
        _FINISH.format(state="'failed'"),
        PRIVILEGE,
    ),
)

# What the legitimate holder (and any worker, for work nobody holds) may do; each writes.
ALLOWED: Final = (
    Probe(
        "the holder renews its lease",
        "a",
        "SELECT * FROM ql3.worker_renew_leases_v1(%(token_a)s, ARRAY[%(a1)s]::bigint[], 60000)",
        "1 row",
    ),
    Probe("the holder appends a task event", "a", _APPEND.format(kind="'task.note'"), "1 row"),
    Probe("the holder finishes its attempt", "a", _FINISH.format(state="'succeeded'"), "1 row"),
    Probe(
        "the holder hands its attempt back",
        "a",
        "SELECT * FROM ql3.worker_release_attempts_v1('worker-a', %(token_a)s,"
        " ARRAY[%(a1)s]::bigint[])",
        "1 row",
    ),
    Probe("another login takes a queued attempt", "b", _TAKE.format(lease="30000"), "1 row"),
)


@pytest.fixture(scope="module")
def fence_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a QL3 database (and a second worker login) for every probe of this module."""
    name = f"ql3_fences_{uuid.uuid4().hex[:8]}"
    database = prepare_ql3_database(pg_cluster, name, template=ql3_template)
    create_login_user(database.superuser_dsn, WORKER_B, WORKER_B_PASSWORD, "worker_ingress")
    yield database
    drop_database(pg_cluster, name)


@pytest.fixture(scope="module")
def ids(fence_db: Ql3Database) -> dict[str, Any]:
    """Set the scene as worker A through its ingress; return what the probes refer to."""
    run_a, run_b, run_c = admit(fence_db, 3, execution=EXECUTION)
    token = uuid.uuid4()
    with WorkerIngress(fence_db.dsn("worker_ingress")) as ingress:
        # A one-minute lease outlasts the module: no probe finds it expired.
        held = ingress.take_attempts(
            worker_id="worker-a", lease_token=token, lease_ms=60_000, limit=3
        )
        taken = {attempt.run_id: attempt for attempt in held}
        failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        b2 = ingress.finish_attempt(taken[run_b].attempt_id, token, failed).next_attempt_id
        assert ingress.release_attempts("worker-a", token, [taken[run_c].attempt_id])
    return {
        "run_a": run_a,
        "run_b": run_b,
        "a1": taken[run_a].attempt_id,
        "b1": taken[run_b].attempt_id,
        "b2": b2,
        "token_a": token,
    }


@pytest.fixture(scope="module")
def logins(fence_db: Ql3Database, ids: dict[str, Any]) -> Iterator[dict[str, psycopg.Connection]]:
    """Yield one autocommit connection per login the probes use, over TCP with passwords."""
    assert ids
    dsns = {
        "a": fence_db.dsn("worker_ingress"),
        "b": make_conninfo(fence_db.superuser_dsn, user=WORKER_B, password=WORKER_B_PASSWORD),
        "runtime": fence_db.dsn("runtime"),
        "admin": fence_db.dsn("admin"),
    }
    conns = {login: psycopg.connect(dsn, autocommit=True) for login, dsn in dsns.items()}
    try:
        yield conns
    finally:
        for conn in conns.values():
            conn.close()


def _history(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every attempt and event row, as `conn` (a worker login, who may read them all) sees them."""
    return (
        conn.execute("SELECT * FROM ql3.attempts ORDER BY id").fetchall(),
        conn.execute("SELECT * FROM ql3.events ORDER BY id").fetchall(),
    )


@pytest.mark.parametrize("probe", FORBIDDEN, ids=lambda probe: probe.what)
def test_a_forbidden_write_is_refused(
    logins: dict[str, psycopg.Connection], ids: dict[str, Any], probe: Probe
) -> None:
    """Each write a worker login does not own is refused and leaves the history as it was."""
    conn = logins[probe.login]
    witness = logins["a"]
    before = _history(witness)
    if probe.expect == FENCED:
        with conn.transaction(force_rollback=True):
            conn.execute(probe.sql.encode(), ids).fetchall()
            assert _history(conn) == before, f"{probe.what}: something was written"
    else:
        error = {
            PRIVILEGE: pg_errors.InsufficientPrivilege,
            ARGUMENT: pg_errors.InvalidParameterValue,
        }
        with pytest.raises(error[probe.expect]), conn.transaction(force_rollback=True):
            conn.execute(probe.sql.encode(), ids)
    assert _history(witness) == before


@pytest.mark.parametrize("probe", ALLOWED, ids=lambda probe: probe.what)
def test_an_owned_write_is_made(
    logins: dict[str, psycopg.Connection], ids: dict[str, Any], probe: Probe
) -> None:
    """The holder's own transitions (and taking unheld work) write, and only in the function."""
    conn = logins[probe.login]
    before = _history(conn)
    with conn.transaction(force_rollback=True):
        rows = conn.execute(probe.sql.encode(), ids).fetchall()
        assert len(rows) == 1, f"{probe.what}: {rows}"
        assert _history(conn) != before
    assert _history(conn) == before


def test_fence_counts() -> None:
    """The matrix holds 29 refused writes (privilege, argument, fence) and 5 allowed ones."""
    kinds = [probe.expect for probe in FORBIDDEN]
    assert (kinds.count(PRIVILEGE), kinds.count(ARGUMENT), kinds.count(FENCED)) == (15, 6, 8)
    assert len(ALLOWED) == 5
    assert len({probe.what for probe in (*FORBIDDEN, *ALLOWED)}) == len(FORBIDDEN) + len(ALLOWED)
