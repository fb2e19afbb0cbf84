"""The least-privilege matrix of DESIGN §11, proven with real login users over TCP and SCRAM.

One table of expectations (`ALLOWED` in role_grants.py) drives every probe: each role x each
table x SELECT / INSERT / UPDATE of each column group / DELETE / TRUNCATE. A probe runs as the
role's login user inside a transaction that is always rolled back; it must either touch exactly
the rows it aims at or fail with `InsufficientPrivilege`, as designed. "public" is a login user
in no QL3 group that was explicitly allowed to connect: it must be refused everything in schema
ql3.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Final

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from ql3_cluster_postgres import ROLE_NAMES, create_login_user
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database, prepare_ql3_database
from role_grants import ALLOWED, PROBES, PUBLIC, ROLES, allowed

if TYPE_CHECKING:
    from collections.abc import Iterator

NOGROUP_USER: Final = "ql3_login_nogroup"
NOGROUP_PASSWORD: Final = uuid.uuid4().hex

CASES: Final = [
    pytest.param(role, table, probe, id=f"{role}-{table}-{probe}")
    for table, probes in PROBES.items()
    for probe in probes
    for role in ROLES
]


def _seed(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Write one row per table (claimed schedule included) and return their ids."""

    def one(query: str, params: dict[str, Any] | None = None) -> int:
        row = conn.execute(query, params).fetchone()
        assert row is not None
        return int(row[0])

    ids: dict[str, Any] = {"probe_token": uuid.uuid4()}
    ids["task"] = one("INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('seed', 0) RETURNING id")
    ids["lonely_task"] = one(
        "INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('lonely', 0) RETURNING id"
    )
    ids["trigger"] = one(
        "INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (%(task)s, 0) RETURNING id", ids
    )
    ids["spare_trigger"] = one(
        "INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (%(task)s, 0) RETURNING id", ids
    )
    ids["schedule"] = one(
        "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
        " claim_owner_id, claim_token, claim_expires_at_ms, updated_at_ms, created_at_ms)"
        " VALUES (%(trigger)s, %(task)s, '* * * * *', 0, 'seed', gen_random_uuid(), 30000, 1, 0)"
        " RETURNING id",
        ids,
    )
    ids["run"] = one(
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) VALUES (%(schedule)s, %(task)s, 1, 'seed', gen_random_uuid(), 1)"
        " RETURNING id",
        ids,
    )
    ids["attempt"] = one(
        "INSERT INTO ql3.attempts (run_id, created_at_ms, updated_at_ms)"
        " VALUES (%(run)s, 1, 1) RETURNING id",
        ids,
    )
    ids["event"] = one(
        "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
        " VALUES (%(run)s, %(attempt)s, 'run.admitted', 1) RETURNING id",
        ids,
    )
    ids["skip"] = one(
        "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms, last_skipped_ms,"
        " skipped_count, misfire_policy, claim_acquired_at_ms, owner_id, claim_token,"
        " created_at_ms) VALUES (%(schedule)s, 0, 0, 1, 'fire_once', 1, 'seed',"
        " gen_random_uuid(), 1) RETURNING id",
        ids,
    )
    ids["pause"] = one(
        "INSERT INTO ql3.schedule_pauses (schedule_id, paused_at_ms, paused_by, resumed_at_ms,"
        " resumed_by, replay, automatic, end_ms, skipped_count)"
        " VALUES (%(schedule)s, 0, 'seed', 1, 'seed', 'skip', false, 0, 0) RETURNING id",
        ids,
    )
    ids["backfill"] = one(
        "INSERT INTO ql3.backfills (request_id, schedule_id, from_ms, to_ms,"
        " include_before_creation, requested_by, requested_at_ms, updated_at_ms)"
        " VALUES ('seed', %(schedule)s, 0, 0, false, 'seed', 0, 0) RETURNING id",
        ids,
    )
    ids["checkpoint"] = one(
        "INSERT INTO ql3.history_checkpoints (schedule_id, seq, covered_below_ms, cutoff_ms,"
        " runs_by_kind, skip_records_by_reason, skipped_by_reason, attempts_by_state, events,"
        " pauses, backfills, hash, pruned_by, created_at_ms) VALUES (%(schedule)s, 1, 0, 0,"
        " '{}', '{}', '{}', '{}', 0, 0, 0, '\\x00', 'seed', 0) RETURNING id",
        ids,
    )
    ids["alert"] = one(
        "INSERT INTO ql3.alerts (schedule_id, kind, subject_key, run_id, raised_at_ms,"
        " raised_by, next_delivery_at_ms) VALUES (%(schedule)s, 'failed', %(run)s, %(run)s, 1,"
        " 'seed', 1) RETURNING id",
        ids,
    )
    ids["delivery"] = one(
        "INSERT INTO ql3.alert_deliveries (alert_id, attempt_number, outcome, error,"
        " worker_login, worker_id, started_at_ms, finished_at_ms)"
        " VALUES (%(alert)s, 1, 'failed', 'seed', 'seed', 'seed', 1, 1) RETURNING id",
        ids,
    )
    one(
        "INSERT INTO ql3.alert_watermarks (schedule_id, kind, since_ms, checked_ms)"
        " VALUES (%(schedule)s, 'late', 0, 0) RETURNING schedule_id",
        ids,
    )
    conn.execute(
        "INSERT INTO ql3.zone_rule_data (version, zone, tzif) SELECT 'seed', zone, tzif"
        " FROM ql3.zone_rule_data WHERE zone = 'UTC' LIMIT 1"
    )
    conn.execute(
        "UPDATE ql3.zone_rule_versions SET superseded_at_ms = took_effect_at_ms"
        " WHERE superseded_at_ms IS NULL"
    )
    ids["zone_version"] = one("SELECT max(seq) FROM ql3.zone_rule_versions")
    ids["verdict"] = one(
        "INSERT INTO ql3.verify_results (checked_at_ms, ok, schedules, runs, violation_total,"
        " violation_counts, violations) VALUES (1, true, 0, 0, 0, '{}', '[]') RETURNING id"
    )
    # An ended revision 1, so that a probe may insert a live revision 2.
    one(
        "INSERT INTO ql3.schedule_revisions (schedule_id, revision, reason, cron, timezone,"
        " misfire_policy, misfire_grace_ms, first_cursor_ms, end_cursor_ms, created_at_ms,"
        " ended_at_ms) VALUES (%(schedule)s, 1, 'migrated', '* * * * *', 'UTC', 'fire_once', 0,"
        " 0, 0, 0, 0) RETURNING revision",
        ids,
    )
    return ids


@pytest.fixture(scope="module")
def matrix_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a QL3 database for the whole matrix, seeded as the owner, plus a no-group user."""
    name = f"ql3_roles_{uuid.uuid4().hex[:8]}"
    database = prepare_ql3_database(pg_cluster, name, template=ql3_template)
    create_login_user(database.superuser_dsn, NOGROUP_USER, NOGROUP_PASSWORD, None)
    with psycopg.connect(database.superuser_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(name), sql.Identifier(NOGROUP_USER)
            )
        )
    yield database
    drop_database(pg_cluster, name)


@pytest.fixture(scope="module")
def seed_ids(matrix_db: Ql3Database) -> dict[str, Any]:
    """Return the ids of the rows seeded as the owner's login user."""
    with psycopg.connect(matrix_db.dsn("owner")) as conn:
        return _seed(conn)


@pytest.fixture(scope="module")
def connections(
    matrix_db: Ql3Database, seed_ids: dict[str, Any]
) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    """Yield one autocommit connection per role, each as that role's login user over TCP."""
    assert seed_ids
    conns: dict[str, psycopg.Connection[Any]] = {}
    try:
        for role in ROLE_NAMES:
            conns[role] = psycopg.connect(matrix_db.dsn(role), autocommit=True)
        conns[PUBLIC] = psycopg.connect(
            matrix_db.superuser_dsn, user=NOGROUP_USER, password=NOGROUP_PASSWORD, autocommit=True
        )
        yield conns
    finally:
        for conn in conns.values():
            conn.close()


@pytest.mark.parametrize(("role", "table", "probe"), CASES)
def test_role_matrix(
    connections: dict[str, psycopg.Connection[Any]],
    seed_ids: dict[str, Any],
    role: str,
    table: str,
    probe: str,
) -> None:
    """Each role may run exactly the statements the design grants it, and nothing else."""
    conn = connections[role]
    query = PROBES[table][probe]
    row = conn.execute("SELECT current_user").fetchone()
    assert row is not None
    assert row[0] == (NOGROUP_USER if role == PUBLIC else f"ql3_login_{role}")
    if role in allowed(table, probe):
        with conn.transaction(force_rollback=True):
            cursor = conn.execute(query, seed_ids)
            if not probe.startswith(("select", "truncate")):
                assert cursor.rowcount == 1, f"{role} {probe} on {table} touched no row"
    else:
        with (
            pytest.raises(pg_errors.InsufficientPrivilege, match="permission denied"),
            conn.transaction(force_rollback=True),
        ):
            conn.execute(query, seed_ids)


def test_matrix_covers_every_table_and_role() -> None:
    """The expectation table names only probed cells, and every QL3 table is probed."""
    assert set(PROBES) == {
        "tasks",
        "triggers",
        "trigger_schedules",
        "runs",
        "attempts",
        "events",
        "skipped_occurrences",
        "backfills",
        "history_checkpoints",
        "schedule_pauses",
        "alerts",
        "alert_deliveries",
        "alert_watermarks",
        "schedule_revisions",
        "schema_migrations",
        "zone_rules",
        "zone_rule_data",
        "zone_rule_versions",
        "verify_results",
    }
    for table, probe in ALLOWED:
        assert probe in PROBES[table]
    assert len(CASES) == len(ROLES) * sum(len(probes) for probes in PROBES.values())


def test_every_ql3_table_is_in_the_matrix(matrix_db: Ql3Database) -> None:
    """A table added by a later migration must be added to the matrix (and to the grants)."""
    with psycopg.connect(matrix_db.dsn("owner")) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'ql3' ORDER BY 1"
        ).fetchall()
    assert {row[0] for row in rows} == set(PROBES)
