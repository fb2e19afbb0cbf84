"""Upgrading to schema 17: the take updates what it picked by primary key, whatever the database.

The plans of the take's nested statements are read back with `auto_explain` (sent to the
session as NOTICEs). Two databases a take must not be fooled by:

- statistics taken when no attempt was queued (ANALYZE over finished attempts only, autovacuum
  off), then a backlog, as a burst admitted at once outruns autovacuum. Under 0016 the UPDATE of
  the picked attempts reads the whole queue through a partial index (`attempts_queued` or
  `attempts_one_live`, whichever the planner prefers: the fault 17 removes, shown here so the
  check can fail); under 17 it probes the primary key;
- a worker session that took once while the queue was empty, then a backlog: the take is
  planned once per session since 17, and with the planner's choices its settings leave it,
  that plan still probes the primary key. The control plants the hazard those settings remove
  (the same plan kept for the session, every access path allowed): the plan made on the empty
  queue reads the whole table.

The backlog is 20 000 attempts. The migration changes no row, and the take still hands out the
oldest attempts first; whether any task has a cap is read from the new partial index
`tasks_capped`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
from migration_files import keep_up_to
from ql3_cluster_postgres import WorkerIngress, migrate, record_zone_rules
from repo_helpers import fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database

_FINISHED = 200
_QUEUED = 20_000
_STATES = "SELECT state, count(*) FROM ql3.attempts GROUP BY state ORDER BY state"
_SETTINGS = (
    "SELECT p.proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
    " WHERE n.nspname = 'ql3' AND p.proname = 'worker_take_attempts_v2'"
)
_SIGNATURE = "ql3.worker_take_attempts_v2(text, uuid, bigint, integer, text[], boolean)"
_TAKE = (
    "SELECT attempt_id, run_id FROM ql3.worker_take_attempts_v2("
    "'w', gen_random_uuid(), 60000, 4, ARRAY[]::text[], true)"
)
_FIRST_FOUR = list(range(_FINISHED + 1, _FINISHED + 5))


def _seed_task(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """One command task and its schedule; autovacuum off for the attempts (statistics stay)."""
    conn.execute("ALTER TABLE ql3.attempts SET (autovacuum_enabled = false)")
    conn.execute("INSERT INTO ql3.tasks (name, created_at_ms, command) VALUES ('t', 1, 'true')")
    conn.execute("INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (1, 1)")
    conn.execute(
        "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, next_due_at_ms,"
        " updated_at_ms, created_at_ms) VALUES (1, 1, '* * * * *', 1, 1, 1)"
    )


def _seed_attempts(conn: psycopg.Connection[tuple[object, ...]], state: str, first: int) -> None:
    """Add Runs from `first` on, one attempt each in `state`: the finished, or the backlog."""
    count = _FINISHED if state == "succeeded" else _QUEUED
    span = {"state": state, "first": first, "last": first + count - 1}
    conn.execute(
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
        " claim_token, created_at_ms)"
        " SELECT 1, 1, n * 60000, 'old', gen_random_uuid(), n * 60000 + 5"
        " FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n",
        span,
    )
    conn.execute(
        "INSERT INTO ql3.attempts (run_id, state, created_at_ms, updated_at_ms,"
        " started_at_ms, finished_at_ms)"
        " SELECT n, %(state)s, n * 60000 + 5, n * 60000 + 6,"
        " CASE WHEN %(state)s = 'succeeded' THEN n * 60000 + 6 END,"
        " CASE WHEN %(state)s = 'succeeded' THEN n * 60000 + 6 END"
        " FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n",
        span,
    )


def _explaining(superuser_dsn: str) -> tuple[psycopg.Connection[tuple[object, ...]], list[str]]:
    """Open a session whose every statement's plan, nested ones too, comes back as a NOTICE."""
    notices: list[str] = []
    conn = psycopg.connect(superuser_dsn, autocommit=True)
    try:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting in (
            "log_min_duration = 0",
            "log_nested_statements = on",
            "log_level = 'notice'",
        ):
            conn.execute(f"SET auto_explain.{setting}")
    except BaseException:
        conn.close()
        raise
    return conn, notices


def _plans(conn: psycopg.Connection[tuple[object, ...]], notices: list[str]) -> list[str]:
    """Take four attempts in `conn` (rolled back); the plans of its statements."""
    notices.clear()
    with conn.transaction(force_rollback=True):
        taken = conn.execute(_TAKE).fetchall()
    assert [run_id for _, run_id in taken] == _FIRST_FOUR
    return list(notices)


def _update_plan(conn: psycopg.Connection[tuple[object, ...]], notices: list[str]) -> str:
    """Take four attempts in `conn` (rolled back); the plan of the UPDATE that took them."""
    (plan,) = [p for p in _plans(conn, notices) if "Update on attempts" in p and "running'" in p]
    return plan


def _reads_the_queue(plan: str) -> bool:
    """Whether the plan reads the attempts table or a partial index of the queue whole."""
    return any(
        path in plan for path in ("Seq Scan on attempts", "attempts_queued", "attempts_one_live")
    )


def _probes_the_key(plan: str) -> bool:
    """Whether the plan reaches the picked attempts by primary key, one probe per id."""
    return "Index Scan using attempts_pkey on attempts a" in plan and "(id = i.id)" in plan


def test_upgrade_to_17_takes_by_key_whatever_the_statistics(
    bare_db: Ql3Database, source: Path
) -> None:
    """Under 16 the update reads the queue's index; under 17 the primary key; no row changed."""
    keep_up_to(source, 16)
    migrate(bare_db.dsn("owner"), source=source)
    with psycopg.connect(bare_db.dsn("owner"), autocommit=True) as conn:
        _seed_task(conn)
        _seed_attempts(conn, "succeeded", 1)
        conn.execute("ANALYZE ql3.attempts")
        _seed_attempts(conn, "queued", _FINISHED + 1)
    before = fetch(bare_db.dsn("owner"), _STATES)
    session, notices = _explaining(bare_db.superuser_dsn)
    with session:
        old_plan = _update_plan(session, notices)
    assert "attempts_queued" in old_plan or "attempts_one_live" in old_plan, old_plan
    assert migrate(bare_db.dsn("owner"))[0] == "0017_take_by_key.sql"
    assert fetch(bare_db.dsn("owner"), _STATES) == before
    assert before == [("queued", _QUEUED), ("succeeded", _FINISHED)]
    session, notices = _explaining(bare_db.superuser_dsn)
    with session:
        new_plan = _update_plan(session, notices)
        (capped,) = [p for p in _plans(session, notices) if "max_running IS NOT NULL)" in p]
    assert not _reads_the_queue(new_plan), new_plan
    assert _probes_the_key(new_plan), new_plan
    # Whether any task has a cap: one probe of the (empty) partial index, not every task read.
    assert "tasks_capped" in capped, capped
    record_zone_rules(bare_db.dsn("owner"))
    with WorkerIngress(bare_db.dsn("worker_ingress")) as ingress:
        taken = ingress.take_attempts(
            worker_id="w", lease_token=uuid4(), lease_ms=60_000, limit=2, commands=True
        )
    assert [a.run_id for a in taken] == _FIRST_FOUR[:2]


def _plan_after_a_backlog(db: Ql3Database) -> str:
    """Take on an empty queue in one session, add a backlog, take again there; that plan."""
    with psycopg.connect(db.dsn("owner"), autocommit=True) as owner:
        _seed_task(owner)
        session, notices = _explaining(db.superuser_dsn)
        with session:
            for _ in range(6):  # past the custom plans PostgreSQL would try first
                assert session.execute(_TAKE).fetchall() == []
            _seed_attempts(owner, "succeeded", 1)
            _seed_attempts(owner, "queued", _FINISHED + 1)
            return _update_plan(session, notices)


def test_a_take_planned_on_an_empty_queue_still_takes_by_key(bare_db: Ql3Database) -> None:
    """The session's plan of the take was made on an empty queue; a backlog does not fool it."""
    migrate(bare_db.dsn("owner"))
    ((settings,),) = fetch(bare_db.dsn("owner"), _SETTINGS)
    assert "plan_cache_mode=force_generic_plan" in settings
    plan = _plan_after_a_backlog(bare_db)
    assert not _reads_the_queue(plan), plan
    assert _probes_the_key(plan), plan


def test_control_a_kept_plan_with_every_path_allowed_reads_the_table(
    bare_db: Ql3Database,
) -> None:
    """Planted: the settings that leave the planner only key probes reset, the plan kept."""
    migrate(bare_db.dsn("owner"))
    with psycopg.connect(bare_db.superuser_dsn, autocommit=True) as conn:
        for setting in (
            "enable_seqscan",
            "enable_bitmapscan",
            "enable_hashjoin",
            "enable_mergejoin",
        ):
            conn.execute(f"ALTER FUNCTION {_SIGNATURE} RESET {setting}")
    plan = _plan_after_a_backlog(bare_db)
    assert _reads_the_queue(plan), plan
