"""`ql3 verify`'s `paused` rule on a real history, and each of its defects planted in a copy.

The history is written through the production paths while the database clock moves forward
(libfaketime): a span resumed with `skip`, one with `fire_once` whose latest occurrence a
commit then admits, one with an until resumed by a replica, and a schedule paused by the database
after two consecutive failed Runs. Verify and the independent oracle find it clean (occurrences
accounted exactly); each defect is planted as the schema owner in a copy of it, beside the
untouched copy as the clean control.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit_due, take
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    WorkerIngress,
    verify_history,
)
from ql3_runtime_core import AttemptOutcome, AttemptResult, ScheduleDefinition, TaskExecution
from ql3_testkit import drop_database, prepare_ql3_database
from repo_helpers import fetch
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ql3_testkit import Ql3Database, ThrowawayCluster

EVERY_SECOND = ScheduleDefinition(cron="* * * * * *")
FAILING = TaskExecution(command="false", max_attempts=1, timeout_ms=60_000)


def _history(db: Ql3Database, cluster: ThrowawayCluster) -> None:
    specs = [ScheduleSpec(name=name, definition=EVERY_SECOND) for name in ("a", "b", "c")]
    specs.append(
        ScheduleSpec(name="d", definition=EVERY_SECOND, execution=FAILING, pause_after_failures=2)
    )
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.apply_schedules(specs)
        admin.pause("a", reason="freeze")
        admin.pause("b")
        admin.pause("c", until_after_ms=2_000)
    cluster.set_clock_offset_ms(6_000)
    with ScheduleAdmin(db.dsn("admin")) as admin:
        admin.resume("a", replay="skip")
        admin.resume("b", replay="fire_once")
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        repo.read_cluster_state()  # loads the recorded zone rules, as a replica connecting
        assert repo.resume_expired_pauses() == 1
    for _ in range(2):
        admit_due(db)
        token = uuid4()
        with WorkerIngress(db.dsn("worker_ingress")) as ingress:
            (attempt,) = take(ingress, token)
            failed = AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
            assert ingress.finish_attempt(attempt.attempt_id, token, failed).recorded
    states = fetch(
        db.dsn("owner"),
        "SELECT t.name, s.state FROM ql3.trigger_schedules AS s"
        " JOIN ql3.tasks AS t ON t.id = s.task_id ORDER BY t.name",
    )
    assert states == [("a", "active"), ("b", "active"), ("c", "active"), ("d", "paused")]


@pytest.fixture
def paused_history(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> Iterator[Callable[[], Ql3Database]]:
    """Write the history once; give a function that returns a fresh copy of it."""
    _history(faketime_db, faketime_cluster)
    copies: list[str] = []

    def copy() -> Ql3Database:
        name = f"ql3_copy_{uuid.uuid4().hex[:12]}"
        copies.append(name)
        return prepare_ql3_database(faketime_cluster, name, template=faketime_db.name)

    yield copy
    for name in copies:
        drop_database(faketime_cluster, name)


def _span(db: Ql3Database, name: str) -> dict[str, Any]:
    with ScheduleAdmin(db.dsn("admin")) as admin:
        return admin.pauses(name)[-1].model_dump()


# Each defect: statements run as the schema owner in a copy, with their parameters;
# each parameter is a schedule's name, sent as its id.
PLANTS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    # The record of `a` names the span of `b`: outside the span it names.
    "record_outside_its_span": [
        (
            (
                "UPDATE ql3.skipped_occurrences SET pause_id = (SELECT max(id)"
                " FROM ql3.schedule_pauses WHERE schedule_id = %s)"
                " WHERE reason = 'paused' AND schedule_id = %s"
            ),
            ("b", "a"),
        ),
    ],
    # `b` resumed as skip, yet its latest occurrence was admitted.
    "run_inside_a_skip_span": [
        (
            "UPDATE ql3.schedule_pauses SET replay = 'skip' WHERE schedule_id = %s",
            ("b",),
        ),
    ],
    # `c` resumed automatically, recorded as having replayed the latest.
    "automatic_resume_replayed": [
        ("ALTER TABLE ql3.schedule_pauses DROP CONSTRAINT schedule_pauses_automatic", ()),
        (
            ("UPDATE ql3.schedule_pauses SET replay = 'fire_once' WHERE schedule_id = %s"),
            ("c",),
        ),
    ],
    # A second span of `a` starting before the first was resumed.
    "overlapping_spans": [
        (
            (
                "INSERT INTO ql3.schedule_pauses (schedule_id, paused_at_ms, paused_by,"
                " first_held_ms, resumed_at_ms, resumed_by, replay, automatic, end_ms,"
                " skipped_count) SELECT schedule_id, paused_at_ms + 1, paused_by, first_held_ms,"
                " resumed_at_ms, resumed_by, 'catch_up', false, end_ms, 0"
                " FROM ql3.schedule_pauses WHERE schedule_id = %s"
            ),
            ("a",),
        ),
    ],
    # `d` names the first of its two failed Runs: only one failure finished up to it.
    "failures_name_an_earlier_run": [
        (
            (
                "UPDATE ql3.schedule_pauses SET last_failed_run_id = ("
                "SELECT min(r.id) FROM ql3.runs AS r WHERE r.schedule_id = %s)"
                " WHERE cause = 'failures'"
            ),
            ("d",),
        ),
    ],
    # `d` claims three consecutive failures; only two Runs failed.
    "failures_not_consecutive": [
        (
            (
                "UPDATE ql3.schedule_pauses SET failure_threshold = 3,"
                " reason = '3 consecutive failed runs' WHERE cause = 'failures'"
            ),
            (),
        ),
    ],
}


def _plant(db: Ql3Database, defect: str) -> None:
    with psycopg.connect(db.dsn("owner"), autocommit=True) as conn:
        ids = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT t.name, s.id FROM ql3.trigger_schedules AS s"
                " JOIN ql3.tasks AS t ON t.id = s.task_id"
            )
        }
        for statement, names in PLANTS[defect]:
            params = tuple(ids[name] for name in names)
            conn.execute(statement, params)


def test_the_paused_rule_on_a_real_history_and_planted_copies(
    paused_history: Callable[[], Ql3Database],
) -> None:
    """The clean control agrees with the oracle; each defect, planted in its own copy, is found.

    One history serves every defect (each in a fresh copy), so the file stays fast.
    """
    control = paused_history()
    report = checked_verify(control.dsn("admin"))
    assert report.ok, report.lines()
    assert _span(control, "c")["automatic"] is True
    assert _span(control, "d")["cause"] == "failures"
    for defect in sorted(PLANTS):
        planted = paused_history()
        _plant(planted, defect)
        found = verify_history(planted.dsn("admin"))
        assert "paused" in {v.rule for v in found.violations}, (defect, found.lines())
        paused = [v for v in found.violations if v.rule == "paused"]
        assert paused, defect
    assert verify_history(control.dsn("admin")).ok
