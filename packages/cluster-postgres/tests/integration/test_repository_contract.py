"""The ScheduleRepository contract (DESIGN §1, §3, §4, §5) held by the PostgreSQL repository.

Written against the runtime-core protocol only, so the same assertions can run against any
implementation; here it is the real one, connected as ql3_runtime.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import psycopg
import pytest
from pydantic import ValidationError
from ql3_cluster_postgres import SCHEMA_VERSION, ConnectionSettings, PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClaimCommit,
    ClusterScheduleClaim,
    CommitStatus,
    InvalidDecisionError,
    ScheduleRepository,
    checked_commit,
    resolve_cluster_schedule_decision,
    same_claim,
    zone_rules_version,
)
from repo_helpers import command, decide, fetch, history_counts, make_schedules

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database


@pytest.fixture
def repository(ql3_db: Ql3Database) -> Iterator[ScheduleRepository]:
    """Yield the implementation under contract, typed as the protocol it must satisfy."""
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        implementation: ScheduleRepository = repo
        yield implementation


def test_no_repository_method_takes_a_time(repository: ScheduleRepository) -> None:
    """No protocol method accepts a caller time: claim takes a command and a limit (DESIGN §1)."""
    parameters = inspect.signature(repository.claim_due_schedules).parameters
    assert list(parameters) == ["command", "limit"]
    for name in ("commit_decisions", "resolve_uncertain_commit", "release_claims"):
        names = inspect.signature(getattr(repository, name)).parameters
        assert not [p for p in names if p.endswith("_ms") or "time" in p or "now" in p]
    with pytest.raises(ValidationError, match="observedAtMs"):
        ClaimClusterScheduleCommand.model_validate(
            {
                "ownerId": "a",
                "claimToken": "11111111-2222-3333-4444-555555555555",
                "observedAtMs": 1,
            }
        )


def test_granted_claims_match_the_stored_row(
    repository: ScheduleRepository, ql3_db: Ql3Database
) -> None:
    """A granted claim is bounded (1..60 s lease) and is exactly what the row stores (DESIGN §3)."""
    make_schedules(ql3_db, 3)
    claims = repository.claim_due_schedules(command(lease_ms=1000), 16)
    assert len(claims) == 3
    rows = {
        row[0]: row
        for row in fetch(
            ql3_db.dsn("runtime"),
            "SELECT id, claim_owner_id, claim_token, version, updated_at_ms,"
            " claim_expires_at_ms FROM ql3.trigger_schedules",
        )
    }
    for claim in claims:
        stored = claim.model_copy(
            update=dict(
                zip(
                    (
                        "owner_id",
                        "claim_token",
                        "version",
                        "claim_acquired_at_ms",
                        "claim_expires_at_ms",
                    ),
                    rows[claim.schedule_id][1:],
                    strict=True,
                )
            )
        )
        assert same_claim(claim, stored)
        assert claim.claim_expires_at_ms - claim.claim_acquired_at_ms == 1000


@pytest.mark.parametrize("field", ["claim_acquired_at_ms", "claim_expires_at_ms", "version"])
def test_commit_fences_on_the_exact_claim(
    repository: ScheduleRepository, ql3_db: Ql3Database, field: str
) -> None:
    """A claim differing in acquired time, expiry or version does not commit: raced (DESIGN §5)."""
    make_schedules(ql3_db, 1)
    (claim,) = repository.claim_due_schedules(command(), 1)
    shift = 1 if field == "version" else -1
    forged = claim.model_copy(update={field: getattr(claim, field) + shift})
    decision = resolve_cluster_schedule_decision(forged, 256)
    outcome = repository.commit_decisions(
        [ClaimCommit(claim=forged, decision=decision, zone_rules_version=zone_rules_version())]
    )
    assert outcome.outcomes[0].status is CommitStatus.RACED
    assert history_counts(ql3_db) == (0, 0, 0)
    assert repository.commit_decisions([decide(claim)]).outcomes[0].status is (
        CommitStatus.COMMITTED
    )


def test_decisions_are_bound_to_the_claim_observation(repository: ScheduleRepository) -> None:
    """A decision observed at another time than the acquired time is never stored (DESIGN §4)."""
    claim_fields = {
        "schedule_id": 1,
        "task_id": 1,
        "version": 1,
        "owner_id": "a",
        "claim_token": "11111111-2222-3333-4444-555555555555",
        "claim_acquired_at_ms": 10_000,
        "claim_expires_at_ms": 40_000,
        "next_due_at_ms": 0,
        "definition": {"cron": "* * * * * *"},
    }
    claim = ClusterScheduleClaim.model_validate(claim_fields)
    decision = resolve_cluster_schedule_decision(claim, 4)
    moved = decision.model_copy(update={"observed_at_ms": decision.observed_at_ms + 1})
    with pytest.raises(InvalidDecisionError, match="observed_at_ms"):
        checked_commit(claim, moved, 4)
    assert repository.commit_decisions([]).outcomes == ()


def test_schema_check_and_database_clock_as_runtime(ql3_db: Ql3Database) -> None:
    """The runtime role can check the schema version and read the database clock."""
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        assert repo.check_schema() == SCHEMA_VERSION
        first = repo.database_now_ms()
        assert repo.database_now_ms() >= first


def test_connections_carry_keepalives_timeouts_and_the_callers_settings(
    ql3_db: Ql3Database,
) -> None:
    """Keepalives, tcp_user_timeout and connect_timeout are set; the caller's DSN keys win."""
    dsn = psycopg.conninfo.make_conninfo(ql3_db.dsn("runtime"), application_name="mine")
    connection = ConnectionSettings(keepalives_idle_s=7, tcp_user_timeout_ms=9000)
    with PostgresScheduleRepository(dsn, connection=connection) as repo:
        conn = repo._connection()
        params = conn.info.get_parameters()
        assert params["keepalives"] == "1"
        assert params["keepalives_idle"] == "7"
        assert params["tcp_user_timeout"] == "9000"
        assert params["connect_timeout"] == "5"
        assert params["application_name"] == "mine"
        row = conn.execute("SELECT current_setting('enable_seqscan')").fetchone()
        assert row == ("off",)


def test_sessions_never_jit_compile_even_where_the_server_would(ql3_db: Ql3Database) -> None:
    """A database set to JIT everything still runs the repository's statements uncompiled."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as su:
        name = psycopg.sql.Identifier(ql3_db.name)
        su.execute(psycopg.sql.SQL("ALTER DATABASE {} SET jit = on").format(name))
        su.execute(psycopg.sql.SQL("ALTER DATABASE {} SET jit_above_cost = 0").format(name))
    make_schedules(ql3_db, 1)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        conn = repo._connection()
        assert conn.execute("SELECT current_setting('jit')").fetchone() == ("off",)
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM ql3.runs")
        row = plan.fetchone()
        assert row is not None
        assert "JIT" not in row[0][0], row[0][0]
        (claim,) = repo.claim_due_schedules(command(), 1)
        repo.commit_decisions([decide(claim)])


def test_statement_observer_sees_each_statement_and_its_parameters(ql3_db: Ql3Database) -> None:
    """The observer gets every statement sent; the claim's parameters are exactly five, no time."""
    make_schedules(ql3_db, 1)
    seen: list[tuple[str, str, dict[str, object]]] = []
    with PostgresScheduleRepository(
        ql3_db.dsn("runtime"),
        statement_observer=lambda name, sql, params: seen.append((name, sql, dict(params))),
    ) as repo:
        repo.read_cluster_state()  # loads the recorded zone rules version
        seen.clear()
        (claim,) = repo.claim_due_schedules(command(), 1)
        repo.commit_decisions([decide(claim)])
    # The claimed schedule's zone is read once (per version and zone), before any decision.
    assert [name for name, _, _ in seen] == [
        "claim_due_schedules",
        "read_zone_rule_data",
        "commit_decisions",
    ]
    claim_sql, claim_params = seen[0][1], seen[0][2]
    assert claim_sql.count("clock_timestamp()") == 1
    assert sorted(claim_params) == [
        "batch_limit",
        "claim_token",
        "lease_ms",
        "owner_id",
        "zone_rules_version",
    ]
    assert seen[2][1].count("clock_timestamp()") == 1
