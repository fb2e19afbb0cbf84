"""Upgrading to schema 18: triggers of one request sent at one database instant never fail.

Under schema 17 `ql3.admin_trigger_run_v1` settled a racing insert on the request id alone, so
two sessions that read the same millisecond and both passed that check met on the occurrence key
(schedule, instant, request id) and the later one failed with a unique violation. The database
clock is frozen so that every call reads one instant, and four sessions send each of 200 requests
together: under 17 some calls fail that way (the defect, shown so that the check can fail). The
collision needs one session's check to fall between the other's two index insertions, a window
of microseconds no test can open on purpose: a round that happens to miss it (seen once in CI,
where other sessions share the two cores) is followed by another, up to five, and the test
fails if none shows the defect. After the upgrade, on the same database and clock, none does
and each request is one Run with one attempt and two events. The upgrade changes no row and
keeps the function's owner, security, settings and grants.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import psycopg
from migration_files import keep_up_to, seed_minute_schedule
from ql3_cluster_postgres import migrate
from repo_helpers import db_now_ms, fetch, send_together

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ql3_testkit import Ql3Database, ThrowawayCluster

_REQUESTS = 200
_SENDERS = 4
# Rounds of `_REQUESTS` sent under 17 at most, until one shows the defect (see the docstring).
_ROUNDS_UNDER_17 = 5
_FUNCTION = (
    "SELECT p.proowner::regrole::text, p.prosecdef, p.proconfig, p.proacl::text[]"
    " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
    " WHERE n.nspname = 'ql3' AND p.proname = 'admin_trigger_run_v1'"
)
_RUNS = "SELECT * FROM ql3.runs ORDER BY id"
_PER_REQUEST = (
    "SELECT r.request_id, r.scheduled_for_ms, r.created_at_ms,"
    " (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id),"
    " (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)"
    " FROM ql3.runs AS r WHERE r.request_id LIKE %s ORDER BY r.id"
)


def _sender(conn: psycopg.Connection[tuple[Any, ...]]) -> Callable[[str], tuple[Any, ...]]:
    """Return a trigger of schedule `old` sent on `conn` (the admin login): (run id, existed)."""

    def send(request_id: str) -> tuple[Any, ...]:
        row = conn.execute(
            "SELECT run_id, existed FROM ql3.admin_trigger_run_v1('old', %s, NULL)",
            (request_id,),
        ).fetchone()
        assert row is not None
        return row

    return send


def _send_at_one_instant(
    cluster: ThrowawayCluster, db: Ql3Database, prefix: str
) -> tuple[int, list[list[tuple[Any, ...] | Exception]]]:
    """Freeze the database clock, send `{prefix}-0..199` from four sessions at once, restart it."""
    now_ms = db_now_ms(db.dsn("owner"))
    cluster.freeze_clock_at_ms(now_ms)
    try:
        with ExitStack() as stack:
            conns = [
                stack.enter_context(psycopg.connect(db.dsn("admin"), autocommit=True))
                for _ in range(_SENDERS)
            ]
            answers = send_together(
                [_sender(conn) for conn in conns], [f"{prefix}-{n}" for n in range(_REQUESTS)]
            )
    finally:
        cluster.set_clock_offset_ms(0)
    return now_ms, answers


def test_upgrade_to_18_settles_triggers_sent_at_one_instant(
    faketime_cluster: ThrowawayCluster, bare_faketime_db: Ql3Database, source: Path
) -> None:
    """Under 17 some of 800 calls fail on runs_occurrence_unique; under 18 none, one Run each."""
    db = bare_faketime_db
    keep_up_to(source, 17)
    migrate(db.dsn("owner"), source=source)
    seed_minute_schedule(db.dsn("owner"), run=("old-replica", 60_250))

    failed: list[Exception] = []
    for round_ in range(_ROUNDS_UNDER_17):
        _, before = _send_at_one_instant(faketime_cluster, db, f"v17-{round_}")
        failed = [a for mine in before for a in mine if isinstance(a, Exception)]
        if failed:
            break
    assert failed, (
        f"under schema 17 no call of {_ROUNDS_UNDER_17} rounds met the occurrence key:"
        " the race was not exercised"
    )
    for exc in failed:
        assert isinstance(exc, psycopg.errors.UniqueViolation), exc
        assert exc.diag.constraint_name == "runs_occurrence_unique", exc

    function = fetch(db.superuser_dsn, _FUNCTION)
    runs = fetch(db.dsn("owner"), _RUNS)
    assert migrate(db.dsn("owner")) == ["0018_trigger_one_instant.sql"]
    assert fetch(db.dsn("owner"), _RUNS) == runs
    assert fetch(db.superuser_dsn, _FUNCTION) == function

    now_ms, after = _send_at_one_instant(faketime_cluster, db, "v18")
    failed = [a for mine in after for a in mine if isinstance(a, Exception)]
    assert not failed, f"{len(failed)} of {_SENDERS * _REQUESTS} calls failed: {failed[0]!r}"
    rows = fetch(db.dsn("owner"), _PER_REQUEST, ("v18-%",))
    assert rows == [(f"v18-{n}", now_ms, now_ms, 1, 2) for n in range(_REQUESTS)]
    answered = [[a for a in mine if not isinstance(a, Exception)] for mine in after]
    for sent in zip(*answered, strict=True):
        assert sorted(existed for _, existed in sent) == [False] + [True] * (_SENDERS - 1), sent
        assert len({run_id for run_id, _ in sent}) == 1, sent
