"""Helpers shared by the repository, admin, ingress, zone and race tests (no fixtures here).

Schedules are created through `ScheduleAdmin` as ql3_admin; only moving a cursor into the past
(so a test need not wait for cron) is done as the owner, which may write any column.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID, uuid4

import psycopg
from ql3_cluster_postgres import ScheduleAdmin, ScheduleSpec
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClaimCommit,
    ClusterScheduleClaim,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
    checked_commit,
    resolve_cluster_schedule_decision,
)
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database

EVERY_SECOND = "* * * * * *"

T = TypeVar("T")


def db_now_ms(dsn: str) -> int:
    """Read the database clock (the only clock tests may use to know 'now')."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()
        assert row is not None
        return int(row[0])


def fetch(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one read statement and return its rows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def make_schedules(
    db: Ql3Database,
    count: int,
    *,
    cron: str = EVERY_SECOND,
    policy: MisfirePolicy = MisfirePolicy.CATCH_UP,
    shift_back_ms: int = 3000,
    prefix: str = "s",
    grace_ms: int = 60_000,
    execution: TaskExecution | None = None,
) -> list[int]:
    """Create `count` schedules as admin, then move them `shift_back_ms` into the past."""
    definition = ScheduleDefinition(cron=cron, misfire_policy=policy, misfire_grace_ms=grace_ms)
    specs = [
        ScheduleSpec(
            name=f"{prefix}{i:05d}", definition=definition, execution=execution or TaskExecution()
        )
        for i in range(count)
    ]
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.apply_schedules(specs)
        names = [spec.name for spec in specs]
        ids = [r.schedule_id for r in admin.list_schedules() if r.name in set(names)]
    if shift_back_ms:
        with psycopg.connect(db.dsn("owner"), autocommit=True) as conn:
            conn.execute(
                # As if created `shift_back_ms` earlier: history checks stay consistent.
                "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - %(shift)s,"
                " created_at_ms = created_at_ms - %(shift)s,"
                " updated_at_ms = updated_at_ms - %(shift)s WHERE id = ANY(%(ids)s)",
                {"shift": shift_back_ms, "ids": ids},
            )
            conn.execute(
                "UPDATE ql3.schedule_revisions SET first_cursor_ms = first_cursor_ms - %(shift)s,"
                " placed_after_ms = placed_after_ms - %(shift)s,"
                " created_at_ms = created_at_ms - %(shift)s WHERE schedule_id = ANY(%(ids)s)",
                {"shift": shift_back_ms, "ids": ids},
            )
    return sorted(ids)


def command(owner: str = "owner-a", lease_ms: int = 30_000, token: UUID | None = None) -> Any:
    """Build a claim command with a fresh token."""
    return ClaimClusterScheduleCommand(
        owner_id=owner, claim_token=token or uuid4(), lease_ms=lease_ms
    )


def decide(claim: ClusterScheduleClaim, budget: int = 256) -> ClaimCommit:
    """Decide and normalize exactly as the Coordinator does."""
    decision = resolve_cluster_schedule_decision(claim, budget)
    return checked_commit(claim, decision, budget)


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0, what: str = "") -> None:
    """Poll `condition` (a database read) until true, bounded by a monotonic deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            msg = f"timed out waiting for {what or condition}"
            raise AssertionError(msg)
        time.sleep(0.02)


def owner_conn(db: Ql3Database) -> psycopg.Connection[Any]:
    """Open an autocommit connection as the schema owner (to craft rows a role may not write)."""
    return psycopg.connect(db.dsn("owner"), autocommit=True)


def plant_run(
    owner: psycopg.Connection[Any], schedule_id: int, scheduled_for_ms: int, owner_id: str
) -> None:
    """Insert a bare run of one occurrence, committed at that same instant, as the owner.

    History the fenced commit never writes this way (a run later than the database clock, or
    one some earlier admission left), for tests of what the admin and the repository make of it.
    """
    owner.execute(
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) SELECT id, task_id, %s, %s, gen_random_uuid(), %s"
        " FROM ql3.trigger_schedules WHERE id = %s",
        (scheduled_for_ms, owner_id, scheduled_for_ms, schedule_id),
    )


def history_counts(db: Ql3Database) -> tuple[int, int, int]:
    """Return (runs, attempts, events) row counts."""
    ((runs, attempts, events),) = fetch(
        db.dsn("runtime"),
        "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.attempts),"
        " (SELECT count(*) FROM ql3.events)",
    )
    return int(runs), int(attempts), int(events)


def proxy_in_front_of(dsn: str) -> WireFaultProxy:
    """Return a (not yet started) fault proxy forwarding to the server `dsn` names."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    return WireFaultProxy(str(params["host"]), int(str(params["port"])))


def through(proxy: WireFaultProxy, dsn: str) -> str:
    """Return `dsn` with its address replaced by the proxy's."""
    return psycopg.conninfo.make_conninfo(dsn, host="127.0.0.1", port=str(proxy.port))


def send_together(
    senders: list[Callable[[str], T]], request_ids: list[str]
) -> list[list[T | Exception]]:
    """Send each request id from every sender at once (a barrier per id); answers per sender.

    Each sender is a callable bound to its own session. An exception is kept as that sender's
    answer for that id, so the caller can count failures and still judge the rest.
    """
    barrier = threading.Barrier(len(senders))
    answers: list[list[T | Exception]] = [[] for _ in senders]

    def run(sender: Callable[[str], T], mine: list[T | Exception]) -> None:
        for request_id in request_ids:
            barrier.wait(timeout=60)
            try:
                mine.append(sender(request_id))
            except Exception as exc:  # noqa: BLE001 - judged by the caller
                mine.append(exc)

    threads = [
        threading.Thread(target=run, args=pair) for pair in zip(senders, answers, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [len(mine) for mine in answers] == [len(request_ids)] * len(senders), answers
    return answers
