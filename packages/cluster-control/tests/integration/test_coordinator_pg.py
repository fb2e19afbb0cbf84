"""Coordinator cycles against the real PostgreSQL repository (in-process, real database)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence  # noqa: TC003  # used in runtime-checked signatures
from functools import partial
from typing import Any

import psycopg
import pytest
from fix_db import db_now_ms, sql_rows, wait_for
from history import add_schedules, assert_exact_history
from ql3_cluster_control import (
    Coordinator,
    CoordinatorMetrics,
    CoordinatorService,
    load_settings,
    postgres_repository_factory,
)
from ql3_cluster_postgres import PostgresScheduleRepository, SchemaMismatchError
from ql3_runtime_core import (
    AdmittedRun,
    ClaimClusterScheduleCommand,
    ClaimCommit,
    ClaimRound,
    ClusterScheduleClaim,
    CommitBatch,
    CommitStatus,
    RepositoryUnavailableError,
    checked_commit,
    resolve_cluster_schedule_decision,
)
from ql3_testkit import Ql3Database, ThrowawayCluster, WireFaultProxy


class RecordingRepository(PostgresScheduleRepository):
    """The real repository, remembering the claims it granted (in order)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.granted: list[ClusterScheduleClaim] = []

    def claim_round(self, command: ClaimClusterScheduleCommand, limit: int) -> ClaimRound:
        """Claim, and remember what was granted."""
        claim_round = super().claim_round(command, limit)
        self.granted.extend(claim_round.claims)
        return claim_round


def _wait_all_due(db: Ql3Database, first: dict[int, int]) -> None:
    latest = max(first.values())
    wait_for(lambda: db_now_ms(db.superuser_dsn) >= latest, timeout_s=5, what="schedules due")


def test_several_claims_in_one_cycle_keep_their_database_times(ql3_db: Ql3Database) -> None:
    """Claim rounds of one cycle carry their own DB times; the summary reports first and last."""
    first = add_schedules(ql3_db.dsn("admin"), 5)
    _wait_all_due(ql3_db, first)
    before = db_now_ms(ql3_db.superuser_dsn)
    with RecordingRepository(ql3_db.dsn("runtime")) as repo:
        result = Coordinator(repo, owner_id="a", claim_batch=2).run_cycle()
    after = db_now_ms(ql3_db.superuser_dsn)
    granted = repo.granted
    assert len(granted) == 5
    assert result.summary.claims == 5
    assert result.summary.first_claim_acquired_at_ms == granted[0].claim_acquired_at_ms
    assert result.summary.last_claim_acquired_at_ms == granted[-1].claim_acquired_at_ms
    times = [claim.claim_acquired_at_ms for claim in granted]
    assert times == sorted(times)
    assert before <= times[0] <= times[-1] <= after
    # Claims of one round share one observation; rounds observe afresh.
    assert times[0] == times[1]
    assert times[2] == times[3]
    created = sql_rows(ql3_db.superuser_dsn, "SELECT min(created_at_ms) FROM ql3.runs")[0][0]
    assert created >= times[0]


def _commits(claims: Sequence[ClusterScheduleClaim]) -> list[ClaimCommit]:
    return [
        checked_commit(claim, resolve_cluster_schedule_decision(claim, 256), 256)
        for claim in claims
    ]


def test_identities_and_notifications_only_for_fenced_admissions(ql3_db: Ql3Database) -> None:
    """A raced commit allocates no run or attempt id and sends no notification."""
    first = add_schedules(ql3_db.dsn("admin"), 3)
    _wait_all_due(ql3_db, first)
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as listener:
        listener.execute("LISTEN ql3_run_admitted")
        with PostgresScheduleRepository(ql3_db.dsn("runtime")) as stale:
            command = ClaimClusterScheduleCommand(
                owner_id="stale", claim_token=uuid.uuid4(), lease_ms=1_000
            )
            claims = stale.claim_due_schedules(command, 16)
            assert len(claims) == 3
            expiry = max(claim.claim_expires_at_ms for claim in claims)
            wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= expiry, timeout_s=5, what="expiry")
            seen: list[AdmittedRun] = []
            with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
                result = Coordinator(repo, owner_id="fresh", on_admitted=seen.append).run_cycle()
            assert result.summary.committed == 3
            batch = stale.commit_decisions(_commits(claims))
        assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.RACED}
        assert all(outcome.runs == () for outcome in batch.outcomes)
        payloads = {
            int(n.payload) for n in listener.notifies(timeout=1.0, stop_after=len(seen) + 5)
        }
    run_ids = {run.run_id for run in seen}
    assert payloads == run_ids
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT count(*), max(id),"
        " pg_sequence_last_value(pg_get_serial_sequence('ql3.runs', 'id')),"
        " (SELECT pg_sequence_last_value(pg_get_serial_sequence('ql3.attempts', 'id'))),"
        " (SELECT count(*) FROM ql3.attempts), array_agg(DISTINCT owner_id) FROM ql3.runs",
    )[0]
    count, max_id, last_run_id, last_attempt_id, attempts, owners = rows
    assert count == len(seen) == max_id == last_run_id
    assert attempts == last_attempt_id == count
    assert owners == ["fresh"]


def test_lost_commit_reply_is_resolved_to_exactly_one_admission(
    ql3_db: Ql3Database, pg_cluster: ThrowawayCluster
) -> None:
    """COMMIT lands but its reply is dropped: settled from facts, one run, claim cleared."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    _wait_all_due(ql3_db, first)
    with WireFaultProxy(pg_cluster.host, pg_cluster.port) as proxy:
        dsn = ql3_db.dsn("runtime", port=str(proxy.port))
        seen: list[AdmittedRun] = []
        with PostgresScheduleRepository(dsn) as repo:
            proxy.drop_next_commit_reply()
            result = Coordinator(repo, owner_id="a", on_admitted=seen.append).run_cycle()
        assert proxy.commit_replies_dropped == 1
    assert result.summary.uncertain == 1
    assert result.summary.committed == 1
    assert len(seen) == 1
    schedule_id = next(iter(first))
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT count(*), count(DISTINCT scheduled_for_ms) FROM ql3.runs WHERE schedule_id = %s",
        [schedule_id],
    )
    assert rows[0] == (1, 1)
    claim = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT claim_token FROM ql3.trigger_schedules WHERE id = %s",
        [schedule_id],
    )
    assert claim == [(None,)]


class FaultOnCommit(PostgresScheduleRepository):
    """The real repository; its first commit fails as if the connection dropped before sending."""

    def __init__(self, *args: Any, on_fault: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_fault = on_fault

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Raise once (and ask the service to stop, like a SIGTERM arriving), then commit."""
        if not self.on_fault.is_set():
            self.on_fault.set()
            msg = "injected: connection lost before the commit was sent"
            raise RepositoryUnavailableError(msg)
        return super().commit_decisions(commits)


def test_graceful_stop_releases_held_claims_for_immediate_takeover(ql3_db: Ql3Database) -> None:
    """Claims held when a stop arrives are released, so another replica claims them at once."""
    first = add_schedules(ql3_db.dsn("admin"), 2)
    _wait_all_due(ql3_db, first)
    settings = load_settings(dsn=ql3_db.dsn("runtime"), owner_id="leaving", lease_ms=60_000)
    faulted = threading.Event()
    service: CoordinatorService

    def factory() -> FaultOnCommit:
        return FaultOnCommit(ql3_db.dsn("runtime"), on_fault=faulted)

    service = CoordinatorService(settings, repository_factory=factory)
    worker = threading.Thread(target=service.run)
    worker.start()
    faulted.wait(10)
    service.request_stop()
    worker.join(20)
    assert not worker.is_alive()
    held = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT count(*) FROM ql3.trigger_schedules WHERE claim_token IS NOT NULL",
    )
    assert held == [(0,)]
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        command = ClaimClusterScheduleCommand(owner_id="next", claim_token=uuid.uuid4())
        assert len(repo.claim_due_schedules(command, 16)) == 2


def test_service_refuses_a_newer_schema(ql3_db: Ql3Database) -> None:
    """A database migrated past this build stops the service with SchemaMismatchError."""
    sql_rows(
        ql3_db.superuser_dsn,
        "INSERT INTO ql3.schema_migrations (name, version, sha256, applied_at_ms)"
        " VALUES ('9999_future.sql', 9999, repeat('0', 64), 0)",
    )
    service = CoordinatorService(load_settings(dsn=ql3_db.dsn("runtime"), owner_id="a"))
    with pytest.raises(SchemaMismatchError, match="9999"):
        service.run()
    assert not service.health.healthy


def test_idle_service_is_woken_by_a_schedule_change(ql3_db: Ql3Database) -> None:
    """With nothing scheduled and a long poll interval, adding a schedule wakes the loop."""
    settings = load_settings(dsn=ql3_db.dsn("runtime"), owner_id="idle", poll_interval_ms=120_000)
    service = CoordinatorService(settings)
    worker = threading.Thread(target=service.run)
    worker.start()
    try:
        wait_for(lambda: service.health.healthy, timeout_s=10, what="service connected")
        wait_for(
            lambda: service.metrics.registry.get_sample_value("ql3_cycles_total") == 1,
            timeout_s=10,
            what="first (empty) cycle",
        )
        add_schedules(ql3_db.dsn("admin"), 1)
        wait_for(
            lambda: bool(sql_rows(ql3_db.superuser_dsn, "SELECT 1 FROM ql3.runs LIMIT 1")),
            timeout_s=10,
            what="an admission well before the 120 s poll interval",
        )
    finally:
        service.request_stop()
        worker.join(20)
    assert not worker.is_alive()


def _at_least(read: Callable[[], float], value: float) -> bool:
    return read() >= value


def test_database_faults_never_stop_the_loop(ql3_db: Ql3Database) -> None:
    """Killed connections are logged, backed off and reconnected; admissions go on exactly once."""
    first = add_schedules(ql3_db.dsn("admin"), 2)
    settings = load_settings(
        dsn=ql3_db.dsn("runtime"), owner_id="sturdy", lease_ms=3_000, retry_max_ms=500
    )
    service = CoordinatorService(settings)
    worker = threading.Thread(target=service.run)
    worker.start()

    def runs() -> int:
        return int(sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.runs")[0][0])

    def faults() -> float:
        return service.metrics.registry.get_sample_value("ql3_database_faults_total") or 0.0

    try:
        wait_for(lambda: runs() > 0, timeout_s=20, what="first admissions")
        for round_ in range(1, 3):
            killed = sql_rows(
                ql3_db.superuser_dsn,
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = 'ql3-coordinator'",
            )[0][0]
            assert killed >= 1
            wait_for(partial(_at_least, faults, round_), timeout_s=20, what="the fault noticed")
            more = runs() + 1
            wait_for(partial(_at_least, runs, more), timeout_s=20, what="admissions after it")
        assert worker.is_alive()
        end_ms = db_now_ms(ql3_db.superuser_dsn) - 1_500
    finally:
        service.request_stop()
        worker.join(20)
    assert not worker.is_alive()
    assert_exact_history(ql3_db.superuser_dsn, first, end_ms)


def test_connections_carry_keepalives_and_tcp_user_timeout(ql3_db: Ql3Database) -> None:
    """The settings' keepalive and tcp_user_timeout values reach the live libpq connection."""
    settings = load_settings(
        dsn=ql3_db.dsn("runtime"),
        keepalives_idle_s=7,
        keepalives_interval_s=3,
        keepalives_count=4,
        tcp_user_timeout_ms=9_000,
        application_name="ql3-keepalive-check",
    )
    repository = postgres_repository_factory(settings)()
    try:
        repository.check_schema()
        conn = repository._conn  # type: ignore[attr-defined]  # the live connection, inspected
        parameters = conn.info.get_parameters()
    finally:
        repository.close()
    assert parameters["keepalives"] == "1"
    assert parameters["keepalives_idle"] == "7"
    assert parameters["keepalives_interval"] == "3"
    assert parameters["keepalives_count"] == "4"
    assert parameters["tcp_user_timeout"] == "9000"
    assert parameters["application_name"] == "ql3-keepalive-check"


def test_an_occurrence_already_admitted_is_warned_counted_and_not_admitted_again(
    ql3_db: Ql3Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A decided occurrence with a run already is a WARNING and a metric; the cycle commits."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    ((schedule_id, cursor),) = first.items()
    _wait_all_due(ql3_db, first)
    sql_rows(
        ql3_db.superuser_dsn,
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) SELECT id, task_id, %s, 'earlier', gen_random_uuid(), %s"
        " FROM ql3.trigger_schedules WHERE id = %s",
        (cursor, cursor, schedule_id),
    )
    metrics = CoordinatorMetrics()
    seen: list[AdmittedRun] = []
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        result = Coordinator(
            repo, owner_id="a", metrics=metrics, on_admitted=seen.append
        ).run_cycle()
    assert result.summary.committed == 1
    assert cursor not in {run.scheduled_for_ms for run in seen}
    warnings = [r for r in caplog.records if getattr(r, "event", None) == "commit.already_admitted"]
    assert [(r.levelname, r.schedule_id, r.scheduled_for_ms) for r in warnings] == [  # type: ignore[attr-defined]
        ("WARNING", schedule_id, cursor)
    ]
    assert metrics.registry.get_sample_value("ql3_already_admitted_total") == 1
    owners = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT owner_id FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s",
        (schedule_id, cursor),
    )
    assert owners == [("earlier",)]


def test_idle_service_reports_overdue_schedules(ql3_db: Ql3Database) -> None:
    """While another replica holds an overdue schedule, the idle service's gauge counts it."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    ((schedule_id, _),) = first.items()
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - 600000,"
        " updated_at_ms = updated_at_ms - 600000 WHERE id = %s",
        (schedule_id,),
    )
    settings = load_settings(dsn=ql3_db.dsn("runtime"), owner_id="idle", poll_interval_ms=200)
    service = CoordinatorService(settings)
    gauge = partial(service.metrics.registry.get_sample_value, "ql3_schedules_overdue")
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as holder:
        command = ClaimClusterScheduleCommand(
            owner_id="holder", claim_token=uuid.uuid4(), lease_ms=60_000
        )
        (claim,) = holder.claim_due_schedules(command, 1)
        worker = threading.Thread(target=service.run)
        worker.start()
        try:
            wait_for(lambda: gauge() == 1, timeout_s=10, what="one overdue schedule")
            assert holder.release_claims([claim]) == 1
            wait_for(lambda: gauge() == 0, timeout_s=10, what="decided again, none overdue")
        finally:
            service.request_stop()
            worker.join(20)
    assert not worker.is_alive()
