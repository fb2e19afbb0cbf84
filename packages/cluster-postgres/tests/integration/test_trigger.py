"""Trigger now (DESIGN §7): one manual Run per request id, its own kind, beside the cron series.

`ScheduleAdmin.trigger_run` sends `ql3.admin_trigger_run_v1` (migration 0008). Everything here is
read back from a real database: the same request twice and two sessions racing one request give
one Run, a lost COMMIT reply is settled by reading the request back, bad input writes nothing,
and a manual Run at the very millisecond of an occurrence leaves that occurrence to the
Coordinator.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import admit_due, take
from ql3_cluster_postgres import (
    ManualRun,
    ScheduleAdmin,
    ScheduleNotFoundError,
    ScheduleStateError,
    WorkerIngress,
)
from ql3_runtime_core import (
    PAYLOAD_MAX_BYTES,
    AttemptOutcome,
    AttemptResult,
    InvalidArgumentError,
    TaskExecution,
)
from repo_helpers import (
    db_now_ms,
    fetch,
    history_counts,
    make_schedules,
    owner_conn,
    proxy_in_front_of,
    send_together,
    through,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

SHELL = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=5_000)


def _schedule(db: Ql3Database, *, prefix: str = "job", shift_back_ms: int = 0) -> str:
    """Create one every-second command schedule named `{prefix}00000`; return its name."""
    make_schedules(db, 1, prefix=prefix, execution=SHELL, shift_back_ms=shift_back_ms)
    return f"{prefix}00000"


def _manual_rows(db: Ql3Database) -> list[tuple[Any, ...]]:
    return fetch(
        db.dsn("owner"),
        "SELECT id, kind, request_id, payload, scheduled_for_ms, created_at_ms, owner_id"
        " FROM ql3.runs WHERE kind = 'manual' ORDER BY id",
    )


def test_a_trigger_admits_one_manual_run_queued_like_a_commit(ql3_db: Ql3Database) -> None:
    """Kind manual, at one database instant, a queued first attempt and the two admission events."""
    name = _schedule(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        run = admin.trigger_run(name, "req-1", payload={"reason": "hotfix"})
    assert not run.existed
    assert run.schedule_name == name
    assert run.payload == {"reason": "hotfix"}
    assert run.scheduled_for_ms == run.created_at_ms
    ((run_id, kind, request_id, payload, for_ms, at_ms, owner),) = _manual_rows(ql3_db)
    assert (run_id, kind, request_id, payload) == (run.run_id, "manual", "req-1", run.payload)
    assert for_ms == at_ms == run.created_at_ms
    login = fetch(ql3_db.dsn("admin"), "SELECT session_user")[0][0]
    assert owner == run.requested_by == login
    attempts = fetch(
        ql3_db.dsn("owner"),
        "SELECT id, attempt_number, state, created_at_ms FROM ql3.attempts WHERE run_id = %s",
        (run.run_id,),
    )
    assert attempts == [(run.attempt_id, 1, "queued", run.created_at_ms)]
    events = fetch(
        ql3_db.dsn("owner"),
        "SELECT kind, attempt_id, created_at_ms FROM ql3.events WHERE run_id = %s ORDER BY id",
        (run.run_id,),
    )
    assert events == [
        ("run.admitted", run.attempt_id, run.created_at_ms),
        ("attempt.queued", run.attempt_id, run.created_at_ms),
    ]


def test_the_same_request_twice_gives_one_run(ql3_db: Ql3Database) -> None:
    """The second call writes nothing and answers with the Run of the first, marked existed."""
    name = _schedule(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        first = admin.trigger_run(name, "same", payload=None)
        before = history_counts(ql3_db)
        second = admin.trigger_run(name, "same", payload=None)
        other = admin.trigger_run(name, "other")
    assert second == first.model_copy(update={"existed": True})
    assert history_counts(ql3_db) == (before[0] + 1, before[1] + 1, before[2] + 2)
    assert other.run_id != first.run_id
    assert [row[2] for row in _manual_rows(ql3_db)] == ["same", "other"]


def test_two_sessions_racing_one_request_admit_one_run(ql3_db: Ql3Database) -> None:
    """The second session waits on the first's uncommitted Run, then answers with it."""
    name = _schedule(ql3_db)
    admin_dsn = ql3_db.dsn("admin")
    answers: list[ManualRun | BaseException] = []
    with psycopg.connect(admin_dsn) as first:
        (first_id,) = first.execute(
            "SELECT run_id FROM ql3.admin_trigger_run_v1(%s, 'race', NULL)", (name,)
        ).fetchone() or (None,)

        def second() -> None:
            try:
                with ScheduleAdmin(admin_dsn, application_name="racer") as admin:
                    answers.append(admin.trigger_run(name, "race"))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                answers.append(exc)

        racer = threading.Thread(target=second)
        racer.start()
        with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as watch:
            waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'racer'"
            waiting += " AND wait_event_type = 'Lock'"
            deadline = time.monotonic() + 20
            while watch.execute(waiting).fetchone() != (1,):
                assert racer.is_alive(), answers
                assert time.monotonic() < deadline, watch.execute(
                    "SELECT application_name, state, wait_event_type, wait_event, query"
                    " FROM pg_stat_activity"
                ).fetchall()
                watch.execute("SELECT pg_sleep(0.02)")
        first.commit()
    racer.join(timeout=30)
    (answer,) = answers
    assert isinstance(answer, ManualRun)
    assert (answer.run_id, answer.existed) == (first_id, True)
    assert len(_manual_rows(ql3_db)) == 1


def test_a_lost_commit_reply_is_settled_by_reading_the_request_back(
    ql3_db: Ql3Database,
) -> None:
    """The COMMIT lands, its reply is swallowed: the Run is read back, and a rerun finds it."""
    name = _schedule(ql3_db)
    admin_dsn = ql3_db.dsn("admin")
    with proxy_in_front_of(admin_dsn) as proxy:
        proxy.drop_next_commit_reply()
        with ScheduleAdmin(through(proxy, admin_dsn)) as admin:
            settled = admin.trigger_run(name, "lost-reply", payload={"n": 1})
        assert proxy.commit_replies_dropped == 1
    with ScheduleAdmin(admin_dsn) as admin:
        again = admin.trigger_run(name, "lost-reply", payload={"n": 1})
    assert settled.existed
    assert again == settled
    assert [row[0] for row in _manual_rows(ql3_db)] == [settled.run_id]


@pytest.mark.parametrize(
    ("request_id", "payload", "argument"),
    [
        ("", None, "request_id"),
        ("-starts-with-dash", None, "request_id"),
        ("has space", None, "request_id"),
        ("x" * 129, None, "request_id"),
        ("ok", {"big": "x" * PAYLOAD_MAX_BYTES}, "payload"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
    ql3_db: Ql3Database, request_id: str, payload: dict[str, Any] | None, argument: str
) -> None:
    """Checked before sending; the database's own checks refuse the same (see the next test)."""
    name = _schedule(ql3_db)
    before = history_counts(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin, pytest.raises(InvalidArgumentError) as err:
        admin.trigger_run(name, request_id, payload=payload)
    assert err.value.argument == argument
    assert history_counts(ql3_db) == before


def test_the_database_refuses_what_the_client_would(ql3_db: Ql3Database) -> None:
    """A login calling the function directly meets the same bounds, named in the message."""
    name = _schedule(ql3_db)
    call = "SELECT * FROM ql3.admin_trigger_run_v1(%s, %s, %s::jsonb)"
    with psycopg.connect(ql3_db.dsn("admin"), autocommit=True) as conn:
        for request_id, payload, field in [
            ("bad id", None, "request_id:"),
            ("ok", "[1]", "payload:"),
            ("ok", '"text"', "payload:"),
        ]:
            with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
                conn.execute(call, (name, request_id, payload))
            assert str(err.value).startswith(field)
    assert _manual_rows(ql3_db) == []


def test_unknown_retired_and_quarantined_schedules_are_refused(ql3_db: Ql3Database) -> None:
    """Typed errors naming the schedule (and its state); a paused schedule is triggered."""
    name = _schedule(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        with pytest.raises(ScheduleNotFoundError) as missing:
            admin.trigger_run("nope", "r1")
        assert missing.value.name == "nope"
        admin.pause(name)
        paused = admin.trigger_run(name, "while-paused")
        admin.retire(name)
        with pytest.raises(ScheduleStateError) as retired:
            admin.trigger_run(name, "r2")
        assert (retired.value.name, retired.value.state) == (name, "retired")
        other = _schedule(ql3_db, prefix="bad")
        with owner_conn(ql3_db) as owner:
            owner.execute(
                "UPDATE ql3.trigger_schedules SET state = 'invalid', invalid_reason = 'planted',"
                " invalidated_at_ms = updated_at_ms WHERE task_id ="
                " (SELECT id FROM ql3.tasks WHERE name = %s)",
                (other,),
            )
        with pytest.raises(ScheduleStateError) as quarantined:
            admin.trigger_run(other, "r3")
        assert quarantined.value.state == "invalid"
    assert [row[2] for row in _manual_rows(ql3_db)] == [paused.request_id]


def test_a_request_id_reused_for_another_schedule_or_payload_is_refused(
    ql3_db: Ql3Database,
) -> None:
    """An idempotency key names one request: reusing it for another one is an error, not a Run."""
    first = _schedule(ql3_db, prefix="a")
    second = _schedule(ql3_db, prefix="b")
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.trigger_run(first, "key", payload={"v": 1})
        for name, payload in [(second, {"v": 1}), (first, {"v": 2}), (first, None)]:
            with pytest.raises(InvalidArgumentError) as err:
                admin.trigger_run(name, "key", payload=payload)
            assert err.value.argument == "request_id"
    assert len(_manual_rows(ql3_db)) == 1


def test_a_manual_run_at_an_occurrence_instant_leaves_it_to_the_coordinator(
    ql3_db: Ql3Database,
) -> None:
    """The occurrence's key excludes manual Runs: the commit still admits it, once."""
    name = _schedule(ql3_db, shift_back_ms=2_000)
    ((schedule_id, task_id, due_ms),) = fetch(
        ql3_db.dsn("owner"),
        "SELECT s.id, s.task_id, s.next_due_at_ms FROM ql3.trigger_schedules AS s"
        " JOIN ql3.tasks AS t ON t.id = s.task_id WHERE t.name = %s",
        (name,),
    )
    with owner_conn(ql3_db) as owner:
        # What the function writes, at the very millisecond of the due occurrence.
        owner.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms, kind, request_id) VALUES (%s, %s, %s, 'ql3_admin_login',"
            " gen_random_uuid(), %s, 'manual', 'same-ms')",
            (schedule_id, task_id, due_ms, due_ms),
        )
    admitted = admit_due(ql3_db)
    assert admitted
    rows = fetch(
        ql3_db.dsn("owner"),
        "SELECT kind, count(*) FROM ql3.runs WHERE schedule_id = %s AND scheduled_for_ms = %s"
        " GROUP BY kind ORDER BY kind",
        (schedule_id, due_ms),
    )
    assert rows == [("cron", 1), ("manual", 1)]


def test_a_worker_executes_a_manual_run_with_its_payload(ql3_db: Ql3Database) -> None:
    """Taken like any attempt: the given payload, or the template when none was given."""
    name = _schedule(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        given = admin.trigger_run(name, "with-payload", payload={"ticket": 42})
        template = admin.trigger_run(name, "with-template")
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        token = uuid4()
        taken = {attempt.run_id: attempt for attempt in take(ingress, token)}
        assert set(taken) == {given.run_id, template.run_id}
        assert dict(taken[given.run_id].payload) == {"ticket": 42}
        assert dict(taken[template.run_id].payload) == {}
        attempt = taken[given.run_id]
        done = ingress.finish_attempt(
            attempt.attempt_id, token, AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0)
        )
        assert done.recorded
    shape = fetch(
        ql3_db.dsn("owner"),
        "SELECT (SELECT count(*) FROM ql3.attempts WHERE run_id = %(r)s),"
        " (SELECT array_agg(kind ORDER BY id) FROM ql3.events WHERE run_id = %(r)s)",
        {"r": given.run_id},
    )
    assert shape == [
        (1, ["run.admitted", "attempt.queued", "attempt.running", "attempt.succeeded"])
    ]


_REQUESTS = 200
_SENDERS = 4


def test_sessions_sending_one_request_at_one_instant_admit_one_run(
    faketime_cluster: ThrowawayCluster, faketime_db: Ql3Database
) -> None:
    """Sent together at one database millisecond, each request is one Run; no call fails.

    Triggers of one request sent together (a retry after a lost reply beside a twin) can read
    the same millisecond. Their rows then collide on the occurrence key (schedule, instant,
    request) as well as on the request id; a session that passed the request id's check before
    another inserted must still settle on the other's Run, not fail. The database clock is
    frozen so that every call reads one instant, and four sessions send each of 200 requests
    together (a barrier) so that some interleave that way: with the conflict settled on the
    request id alone (schema 17), 10 to 33 of the 800 calls failed here with a unique violation
    on `runs_occurrence_unique`.
    """
    name = _schedule(faketime_db)
    now_ms = db_now_ms(faketime_db.dsn("owner"))
    faketime_cluster.freeze_clock_at_ms(now_ms)
    request_ids = [f"request-{n}" for n in range(_REQUESTS)]
    with ExitStack() as sessions:
        admins = [
            sessions.enter_context(ScheduleAdmin(faketime_db.dsn("admin"))) for _ in range(_SENDERS)
        ]
        answers = send_together([partial(admin.trigger_run, name) for admin in admins], request_ids)
    failed = [a for mine in answers for a in mine if isinstance(a, Exception)]
    assert not failed, f"{len(failed)} of {_SENDERS * _REQUESTS} triggers failed: {failed[0]!r}"
    rows = _manual_rows(faketime_db)
    assert [row[2] for row in rows] == request_ids
    assert {(row[4], row[5]) for row in rows} == {(now_ms, now_ms)}
    for n, sent in enumerate(zip(*answers, strict=True)):
        run_ids = {a.run_id for a in sent if isinstance(a, ManualRun)}
        written = [a for a in sent if isinstance(a, ManualRun) and not a.existed]
        assert (run_ids, len(written)) == ({rows[n][0]}, 1), sent
    per_run = fetch(
        faketime_db.dsn("owner"),
        "SELECT (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id),"
        " (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)"
        " FROM ql3.runs AS r WHERE r.kind = 'manual'",
    )
    assert per_run == [(1, 2)] * _REQUESTS
