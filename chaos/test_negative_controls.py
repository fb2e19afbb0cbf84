"""Negative controls: deliberately broken admitters whose histories `verify_history` must catch.

A checker that cannot fail proves nothing. Each control runs a tiny broken admitter written here
(never the real Coordinator) against a real QL3 database and requires the checker to report the
rule that the bug breaks:

- node clock instead of the database clock: a node 1 h fast admits an hour early and stamps its
  own time -> `future`; a node 1 h slow stamping the commit (the rejected "database time for the
  claim, node time for the commit") -> `early`, `time_backwards` (CHECK dropped, as a broken build);
- the UNIQUE constraint dropped and two unfenced admitters racing -> `duplicate`;
- re-admitting after a lost COMMIT reply (a real one, from `WireFaultProxy`), UNIQUE dropped ->
  `duplicate`.

Rule zero forbids reading the node clock even here, so a skewed node clock is simulated exactly:
database time plus the skew.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg
import pytest
from expected import first_after
from harness import EVERY_SECOND, wait_until
from psycopg.conninfo import make_conninfo
from ql3_cluster_postgres import verify_history
from ql3_testkit import ThrowawayCluster, WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from harness import Scenario

HOUR_MS = 3_600_000
NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[ThrowawayCluster]:
    """One PostgreSQL for every negative control (each gets its own database)."""
    with ThrowawayCluster(name="negative") as cluster:
        yield cluster


def _cursor(conn: psycopg.Connection[tuple[int, ...]], schedule_id: int) -> tuple[int, int]:
    row = conn.execute(
        "SELECT next_due_at_ms, task_id FROM ql3.trigger_schedules WHERE id = %s", (schedule_id,)
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _broken_admit(
    conn: psycopg.Connection[tuple[int, ...]],
    schedule_id: int,
    occurrence: int,
    stamp_ms: int,
    *,
    commit: bool = True,
) -> None:
    """Admit `occurrence` stamped with `stamp_ms` (a time from the caller: the bug) and move on."""
    _, task_id = _cursor(conn, schedule_id)
    row = conn.execute(
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) VALUES (%s, %s, %s, 'broken', %s, %s) RETURNING id",
        (schedule_id, task_id, occurrence, uuid.uuid4(), stamp_ms),
    ).fetchone()
    assert row is not None
    attempt = conn.execute(
        "INSERT INTO ql3.attempts (run_id, created_at_ms, updated_at_ms) VALUES (%s, %s, %s)"
        " RETURNING id",
        (row[0], stamp_ms, stamp_ms),
    ).fetchone()
    assert attempt is not None
    for kind in ("run.admitted", "attempt.queued"):
        conn.execute(
            "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
            " VALUES (%s, %s, %s, %s)",
            (row[0], attempt[0], kind, stamp_ms),
        )
    conn.execute(
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = greatest(next_due_at_ms, %s),"
        " updated_at_ms = %s, version = version + 1 WHERE id = %s",
        (first_after(EVERY_SECOND, "UTC", occurrence), stamp_ms, schedule_id),
    )
    if commit:
        conn.commit()


def _db_now(conn: psycopg.Connection[tuple[int, ...]]) -> int:
    row = conn.execute(NOW_SQL).fetchone()
    assert row is not None
    return int(row[0])


def _caught(run: Scenario, rules: tuple[str, ...]) -> None:
    """Require every rule in `rules` among the checker's findings; record the verdict."""
    report = verify_history(run.dsn("admin"), stale_claim_grace_ms=0)
    found = {rule: report.count(rule) for rule in sorted({v.rule for v in report.violations})}
    row = run.evidence
    row.expected, row.admitted, row.duplicated = report.expected, report.admitted, report.duplicated
    row.early, row.missing = report.early, report.missing
    run.note("caught: " + ", ".join(f"{rule}={count}" for rule, count in found.items()))
    assert not report.ok, "the checker accepted a broken history"
    for rule in rules:
        assert found.get(rule, 0) >= 1, f"rule {rule!r} not reported; found {found}"


def _due_schedule(run: Scenario, conn: psycopg.Connection[tuple[int, ...]]) -> int:
    (schedule_id,) = run.add_schedules(1, window_s=2 * HOUR_MS / 1000)
    cursor, _ = _cursor(conn, schedule_id)
    wait_until(lambda: _db_now(conn) >= cursor + 1_000, timeout_s=5, what="two occurrences due")
    return schedule_id


def test_fast_node_clock_is_caught(
    scenario: Callable[[str, str], Scenario], shared_cluster: ThrowawayCluster
) -> None:
    """A node clock 1 h fast admits an hour early and stamps its own time: `future`."""
    run = scenario("negative-node-clock-fast", "7 (control)")
    run.prepare(shared_cluster)
    with psycopg.connect(run.dsn("owner")) as conn:
        schedule_id = _due_schedule(run, conn)
        node_now = _db_now(conn) + HOUR_MS  # the broken node's clock
        cursor, _ = _cursor(conn, schedule_id)
        for occurrence in (cursor, cursor + 1_000, cursor + 2_000):
            _broken_admit(conn, schedule_id, occurrence, node_now)
    run.fault("admitter deciding and stamping with a node clock 1 h fast")
    _caught(run, ("future",))


def test_node_time_for_the_commit_is_caught(
    scenario: Callable[[str, str], Scenario], shared_cluster: ThrowawayCluster
) -> None:
    """Stamping commits with a node clock 1 h slow (CHECK dropped) is `early`, `time_backwards`."""
    run = scenario("negative-node-clock-commit", "7 (control)")
    run.prepare(shared_cluster)
    with psycopg.connect(run.dsn("owner")) as conn:
        conn.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_not_early")
        conn.commit()
        schedule_id = _due_schedule(run, conn)
        cursor, _ = _cursor(conn, schedule_id)
        _broken_admit(conn, schedule_id, cursor, _db_now(conn))  # a correct admission first
        _broken_admit(conn, schedule_id, cursor + 1_000, _db_now(conn) - HOUR_MS)
    run.fault("commit stamped with a node clock 1 h slow; runs_not_early CHECK dropped")
    _caught(run, ("early", "time_backwards"))


def test_dropped_unique_and_unfenced_race_is_caught(
    scenario: Callable[[str, str], Scenario], shared_cluster: ThrowawayCluster
) -> None:
    """Two unfenced admitters racing without the UNIQUE constraint: `duplicate`."""
    run = scenario("negative-unique-dropped", "7 (control)")
    run.prepare(shared_cluster)
    with (
        psycopg.connect(run.dsn("owner")) as first,
        psycopg.connect(run.dsn("owner")) as second,
    ):
        first.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique")
        first.commit()
        schedule_id = _due_schedule(run, first)
        cursor, _ = _cursor(first, schedule_id)
        first.commit()
        # Both read the same cursor (above) and admit it: nothing fences the second one.
        _broken_admit(first, schedule_id, cursor, _db_now(first))
        _broken_admit(second, schedule_id, cursor, _db_now(second))
    run.fault("runs_occurrence_unique dropped; two admitters without a claim fence")
    _caught(run, ("duplicate",))


def test_readmitting_after_lost_reply_is_caught(
    scenario: Callable[[str, str], Scenario], shared_cluster: ThrowawayCluster
) -> None:
    """Treating a lost COMMIT reply as a failure and admitting again: `duplicate`."""
    run = scenario("negative-readmit-after-lost-reply", "7 (control)")
    run.prepare(shared_cluster)
    proxy = WireFaultProxy(shared_cluster.host, shared_cluster.port).start()
    run.on_close(proxy.stop)
    via_proxy = make_conninfo(run.dsn("owner"), host="127.0.0.1", port=str(proxy.port))
    with psycopg.connect(run.dsn("owner")) as direct:
        direct.execute("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique")
        direct.commit()
        schedule_id = _due_schedule(run, direct)
        cursor, _ = _cursor(direct, schedule_id)
        direct.commit()
        lossy = psycopg.connect(via_proxy)
        try:
            proxy.drop_next_commit_reply()
            _broken_admit(lossy, schedule_id, cursor, _db_now(lossy), commit=False)
            with pytest.raises(psycopg.OperationalError):
                lossy.commit()
        finally:
            lossy.close()
        assert proxy.commit_replies_dropped == 1
        # The bug: "the commit failed", so admit the same occurrence again.
        _broken_admit(direct, schedule_id, cursor, _db_now(direct))
    run.fault("COMMIT reply lost (proxy), the admitter retried blindly; UNIQUE dropped")
    _caught(run, ("duplicate",))
