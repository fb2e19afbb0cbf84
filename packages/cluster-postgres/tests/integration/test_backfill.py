"""Backfill (DESIGN §7): the occurrences of a span without a Run admitted once each, accounted.

`ScheduleAdmin.backfill` plans with the database's revisions, skip records and zone rules and
sends `ql3.admin_backfill_batch_v1` (migration 0011) one batch per transaction. The histories
are real: a Coordinator's claim and commit (through the repository) pass missed occurrences of a
`skip` schedule into a misfire skip record; everything asserted is read back from the database.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
import pytest
from ingress_helpers import take
from ql3_cluster_postgres import (
    MAX_BACKFILL_OCCURRENCES,
    BackfillBatch,
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleNotFoundError,
    ScheduleStateError,
    WorkerIngress,
    verify_history,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    CommitStatus,
    InvalidArgumentError,
    MisfirePolicy,
    RepositoryUnavailableError,
    TaskExecution,
)
from ql3_testkit import oracle_verdict
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    history_counts,
    make_schedules,
    proxy_in_front_of,
    through,
    wait_until,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

SHELL = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=5_000)
MISSED_S = 12


def commit_due(db: Ql3Database) -> int:
    """Claim and commit every due schedule once, as a Coordinator cycle does; runs admitted."""
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 16)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert all(o.status is CommitStatus.COMMITTED for o in batch.outcomes)
    return sum(len(o.runs) for o in batch.outcomes)


def skipped_history(db: Ql3Database, prefix: str = "bf") -> tuple[str, int, list[int]]:
    """Write a `skip` schedule whose first claim came MISSED_S late: (name, id, skipped)."""
    (schedule_id,) = make_schedules(
        db,
        1,
        prefix=prefix,
        policy=MisfirePolicy.SKIP,
        grace_ms=0,
        shift_back_ms=MISSED_S * 1_000,
        execution=SHELL,
    )
    commit_due(db)
    ((first, last, count),) = fetch(
        db.dsn("owner"),
        "SELECT first_skipped_ms, last_skipped_ms, skipped_count"
        " FROM ql3.skipped_occurrences WHERE schedule_id = %s",
        (schedule_id,),
    )
    instants = list(range(first, last + 1, 1_000))
    assert len(instants) == count >= MISSED_S - 2
    return f"{prefix}00000", schedule_id, instants


def backfilled(db: Ql3Database, schedule_id: int) -> list[tuple[Any, ...]]:
    """(occurrence, skip record superseded, request id) of each backfilled Run, in order."""
    return fetch(
        db.dsn("owner"),
        "SELECT r.scheduled_for_ms, r.supersedes_skip_id, b.request_id, r.created_at_ms"
        " FROM ql3.runs AS r JOIN ql3.backfills AS b ON b.id = r.backfill_id"
        " WHERE r.schedule_id = %s AND r.kind = 'backfill' ORDER BY r.scheduled_for_ms",
        (schedule_id,),
    )


def assert_clean(db: Ql3Database) -> None:
    """Verify and the test kit's independent oracle both find the history clean."""
    report = verify_history(db.dsn("admin"))
    assert report.ok, [v.line() for v in report.violations]
    oracle = oracle_verdict(db.dsn("admin"))
    assert oracle.ok, oracle.findings


def test_a_backfill_admits_each_skipped_occurrence_once_linked_to_its_record(
    ql3_db: Ql3Database,
) -> None:
    """One Run per skipped occurrence, kind backfill, linked; the skip record stays; clean."""
    name, schedule_id, instants = skipped_history(ql3_db)
    before = db_now_ms(ql3_db.dsn("admin"))
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        report = admin.backfill(
            name, instants[0] - 5_000, before, request_id="fill-1", batch_size=4
        )
    assert (report.admitted, report.already_run, report.state) == (len(instants), 0, "done")
    assert report.batches == -(-len(instants) // 4)
    rows = backfilled(ql3_db, schedule_id)
    ((skip_id,),) = fetch(ql3_db.dsn("owner"), "SELECT id FROM ql3.skipped_occurrences")
    assert [row[0] for row in rows] == instants
    assert {(row[1], row[2]) for row in rows} == {(skip_id, "fill-1")}
    assert all(row[3] >= row[0] and row[3] >= before for row in rows)
    shapes = fetch(
        ql3_db.dsn("owner"),
        "SELECT (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id AND a.state ="
        " 'queued'), (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)"
        " FROM ql3.runs AS r WHERE r.kind = 'backfill'",
    )
    assert set(shapes) == {(1, 2)}
    ((state, admitted, already, batches, by),) = fetch(
        ql3_db.dsn("owner"),
        "SELECT state, admitted, already_run, batches, requested_by FROM ql3.backfills",
    )
    login = fetch(ql3_db.dsn("admin"), "SELECT session_user")[0][0]
    assert (state, admitted, already, batches, by) == (
        "done",
        len(instants),
        0,
        report.batches,
        login,
    )
    assert_clean(ql3_db)
    # Counted apart from the cron series by status and verify, each from its own statement.
    ((cron,),) = fetch(ql3_db.dsn("owner"), "SELECT count(*) FROM ql3.runs WHERE kind = 'cron'")
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        (status,) = admin.status().schedules
    assert (status.runs_admitted, status.backfilled_runs) == (cron, len(instants))
    verified = verify_history(ql3_db.dsn("admin"))
    assert (verified.runs, verified.backfilled_runs) == (cron, len(instants))


def test_a_dry_run_writes_nothing_and_a_rerun_admits_nothing_new(ql3_db: Ql3Database) -> None:
    """Dry run: the plan, nothing written. The same request again: everything already had a Run."""
    name, schedule_id, instants = skipped_history(ql3_db)
    counts = history_counts(ql3_db)
    span = (instants[0], instants[-1])
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        dry = admin.backfill(name, *span, request_id="dry", dry_run=True)
        assert history_counts(ql3_db) == counts
        assert fetch(ql3_db.dsn("owner"), "SELECT count(*) FROM ql3.backfills") == [(0,)]
        assert [at for at, _ in dry.plan.occurrences] == instants
        assert (dry.admitted, dry.backfill_id, dry.dry_run) == (0, None, True)
        first = admin.backfill(name, *span, request_id="again")
        again = admin.backfill(name, *span, request_id="again")
        with pytest.raises(InvalidArgumentError, match="request_id"):
            admin.backfill(name, span[0], span[1] - 1_000, request_id="again")
    assert (first.admitted, again.admitted, again.already_run) == (len(instants), 0, len(instants))
    assert len(backfilled(ql3_db, schedule_id)) == len(instants)
    ((admitted, batches),) = fetch(
        ql3_db.dsn("owner"), "SELECT admitted, batches FROM ql3.backfills"
    )
    assert (admitted, batches) == (len(instants), 2)


def test_a_crash_between_batches_leaves_a_prefix_and_a_rerun_admits_the_rest(
    ql3_db: Ql3Database,
) -> None:
    """The process dies after two committed batches; the rerun admits the rest, nothing twice."""
    name, schedule_id, instants = skipped_history(ql3_db)

    class CrashError(Exception):
        pass

    def crash_after_two(batch: BackfillBatch, done: int, total: int) -> None:
        if batch.batches == 2:
            raise CrashError(f"{done} of {total}")

    span = (instants[0], instants[-1])
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        with pytest.raises(CrashError):
            admin.backfill(name, *span, request_id="crashy", batch_size=3, progress=crash_after_two)
        prefix = [row[0] for row in backfilled(ql3_db, schedule_id)]
        assert prefix == instants[:6]
        assert fetch(ql3_db.dsn("owner"), "SELECT state FROM ql3.backfills") == [("running",)]
        report = admin.backfill(name, *span, request_id="crashy", batch_size=3)
    assert (report.admitted, report.already_run) == (len(instants) - 6, 6)
    assert [row[0] for row in backfilled(ql3_db, schedule_id)] == instants
    assert fetch(ql3_db.dsn("owner"), "SELECT state FROM ql3.backfills") == [("done",)]
    assert_clean(ql3_db)


def test_two_admins_racing_one_backfill_admit_each_occurrence_once(ql3_db: Ql3Database) -> None:
    """Same request from two sessions at once, beside a Coordinator committing: one Run each."""
    name, schedule_id, instants = skipped_history(ql3_db)
    span = (instants[0], instants[-1])
    reports: list[Any] = []
    errors: list[BaseException] = []

    def fill() -> None:
        try:
            with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
                reports.append(admin.backfill(name, *span, request_id="race", batch_size=2))
        except BaseException as exc:  # noqa: BLE001  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=fill) for _ in range(2)]
    for thread in threads:
        thread.start()
    cron = 0
    while any(thread.is_alive() for thread in threads):
        cron += commit_due(ql3_db)
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(r.admitted for r in reports) == len(instants)
    assert [row[0] for row in backfilled(ql3_db, schedule_id)] == instants
    ((admitted,),) = fetch(ql3_db.dsn("owner"), "SELECT admitted FROM ql3.backfills")
    assert admitted == len(instants)
    assert_clean(ql3_db)


def test_include_before_creation_admits_the_occurrences_before_the_first_cursor(
    ql3_db: Ql3Database,
) -> None:
    """Before the first cursor: counted and left out without the flag, admitted unlinked with it."""
    name, schedule_id, instants = skipped_history(ql3_db)
    ((first_cursor,),) = fetch(
        ql3_db.dsn("owner"),
        "SELECT first_cursor_ms FROM ql3.schedule_revisions WHERE schedule_id = %s",
        (schedule_id,),
    )
    span = (first_cursor - 5_000, instants[-1])
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        plain = admin.backfill(name, *span, request_id="plain")
        assert (plain.admitted, plain.before_creation_left) == (len(instants), 5)
        full = admin.backfill(name, *span, request_id="full", include_before_creation=True)
    assert (full.admitted, full.already_run, full.before_creation_left) == (5, len(instants), 0)
    rows = backfilled(ql3_db, schedule_id)
    early = [row for row in rows if row[0] < first_cursor]
    assert [row[0] for row in early] == list(range(first_cursor - 5_000, first_cursor, 1_000))
    assert {(row[1], row[2]) for row in early} == {(None, "full")}
    assert_clean(ql3_db)


def test_a_worker_executes_a_backfilled_run_like_any_other(ql3_db: Ql3Database) -> None:
    """Taken, run and finished: one Run, one attempt, its admission and execution events."""
    name, _, instants = skipped_history(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.backfill(name, instants[0], instants[0], request_id="one")
    ((run_id, _),) = fetch(
        ql3_db.dsn("owner"), "SELECT id, kind FROM ql3.runs WHERE kind = 'backfill'"
    )
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        token = uuid4()
        taken = {attempt.run_id: attempt for attempt in take(ingress, token)}
        assert run_id in taken
        done = ingress.finish_attempt(
            taken[run_id].attempt_id,
            token,
            AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0),
        )
        assert done.recorded
    shape = fetch(
        ql3_db.dsn("owner"),
        "SELECT (SELECT count(*) FROM ql3.attempts WHERE run_id = %(r)s),"
        " (SELECT array_agg(kind ORDER BY id) FROM ql3.events WHERE run_id = %(r)s)",
        {"r": run_id},
    )
    assert shape == [
        (1, ["run.admitted", "attempt.queued", "attempt.running", "attempt.succeeded"])
    ]
    assert_clean(ql3_db)


def test_bad_input_is_refused_naming_the_flag_and_writes_nothing(ql3_db: Ql3Database) -> None:
    """From after to, a span over the bound, unknown and retired schedules, a bad request id."""
    name, _, instants = skipped_history(ql3_db)
    counts = history_counts(ql3_db)
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        with pytest.raises(InvalidArgumentError, match="--from"):
            admin.backfill(name, instants[-1], instants[0], request_id="r1")
        huge = instants[0] - (MAX_BACKFILL_OCCURRENCES + 10) * 1_000
        with pytest.raises(InvalidArgumentError, match=r"--to.*MAX_BACKFILL_OCCURRENCES"):
            admin.backfill(name, huge, instants[-1], request_id="r2", include_before_creation=True)
        with pytest.raises(InvalidArgumentError, match="request_id"):
            admin.backfill(name, instants[0], instants[-1], request_id="no spaces")
        with pytest.raises(InvalidArgumentError, match="--batch"):
            admin.backfill(name, instants[0], instants[-1], request_id="r3", batch_size=0)
        with pytest.raises(ScheduleNotFoundError):
            admin.backfill("nope", instants[0], instants[-1], request_id="r4")
        admin.retire(name)
        with pytest.raises(ScheduleStateError, match="retired"):
            admin.backfill(name, instants[0], instants[-1], request_id="r5")
        other, _, _ = skipped_history(ql3_db, prefix="bad")
        with psycopg.connect(ql3_db.dsn("owner"), autocommit=True) as owner:
            owner.execute(
                "UPDATE ql3.trigger_schedules SET state = 'invalid', invalid_reason = 'planted',"
                " invalidated_at_ms = updated_at_ms WHERE task_id ="
                " (SELECT id FROM ql3.tasks WHERE name = %s)",
                (other,),
            )
        counts = history_counts(ql3_db)
        with pytest.raises(ScheduleStateError) as quarantined:
            admin.backfill(other, instants[0], instants[-1], request_id="r6")
        assert quarantined.value.state == "invalid"
    assert history_counts(ql3_db) == counts
    assert fetch(ql3_db.dsn("owner"), "SELECT count(*) FROM ql3.backfills") == [(0,)]


def test_the_database_refuses_an_occurrence_it_may_not_admit(ql3_db: Ql3Database) -> None:
    """Sent past the planner: a record not covering it, the cursor, no link, outside the span."""
    name, schedule_id, instants = skipped_history(ql3_db)
    ((skip_id, cursor),) = fetch(
        ql3_db.dsn("owner"),
        "SELECT k.id, s.next_due_at_ms FROM ql3.skipped_occurrences AS k"
        " JOIN ql3.trigger_schedules AS s ON s.id = k.schedule_id",
    )
    statement = "SELECT * FROM ql3.admin_backfill_batch_v1(%s, 'x', %s, %s, false, %s, %s, true)"
    cases = [
        ([instants[0] - 500], [skip_id], "not covered by skip record"),
        ([cursor], [skip_id], "cursor"),
        ([instants[0]], [None], "include_before_creation is false"),
        ([instants[0] - 6_000], [skip_id], "outside the span"),
    ]
    # The cursor is not decided yet even once it is past: no Coordinator committed it.
    wait_until(lambda: db_now_ms(ql3_db.dsn("admin")) > cursor, what="the cursor to pass")
    for occurrences, skips, why in cases:
        with (
            psycopg.connect(ql3_db.dsn("admin"), autocommit=True) as conn,
            pytest.raises(psycopg.errors.InvalidParameterValue, match=why),
        ):
            conn.execute(statement, (name, instants[0] - 5_000, cursor, occurrences, skips))
    assert backfilled(ql3_db, schedule_id) == []


def test_a_lost_batch_reply_is_sent_again_and_admits_nothing_twice(ql3_db: Ql3Database) -> None:
    """The COMMIT of batch 2 lands, its reply is swallowed: the batch is sent again, harmlessly."""
    name, schedule_id, instants = skipped_history(ql3_db)
    admin_dsn = ql3_db.dsn("admin")
    with proxy_in_front_of(admin_dsn) as proxy:

        def arm_after_first(batch: BackfillBatch, _done: int, _total: int) -> None:
            if batch.batches == 1:
                proxy.drop_next_commit_reply()

        with ScheduleAdmin(through(proxy, admin_dsn)) as admin:
            report = admin.backfill(
                name, instants[0], instants[-1], request_id="lossy", batch_size=3,
                progress=arm_after_first,
            )  # fmt: skip
        assert proxy.commit_replies_dropped == 1
    # Batch 2 landed before its reply was lost: sent again, it found its three Runs there.
    assert (report.admitted, report.already_run) == (len(instants) - 3, 3)
    assert [row[0] for row in backfilled(ql3_db, schedule_id)] == instants
    ((admitted, state),) = fetch(ql3_db.dsn("owner"), "SELECT admitted, state FROM ql3.backfills")
    assert (admitted, state) == (len(instants), "done")


def test_a_connection_cut_between_batches_then_a_rerun_admits_every_occurrence_once(
    ql3_db: Ql3Database,
) -> None:
    """The proxy resets its connections after batch 2 and goes away; the rerun admits the rest."""
    name, schedule_id, instants = skipped_history(ql3_db)
    admin_dsn = ql3_db.dsn("admin")
    with proxy_in_front_of(admin_dsn) as proxy:

        def cut_after_second(batch: BackfillBatch, _done: int, _total: int) -> None:
            if batch.batches == 2:
                proxy.reset_connections()
                proxy.stop()  # no reconnecting either: the process is as good as gone

        with (
            ScheduleAdmin(through(proxy, admin_dsn)) as admin,
            pytest.raises(RepositoryUnavailableError),
        ):
            admin.backfill(
                name, instants[0], instants[-1], request_id="cut", batch_size=3,
                progress=cut_after_second,
            )  # fmt: skip
        assert [row[0] for row in backfilled(ql3_db, schedule_id)] == instants[:6]
    with ScheduleAdmin(admin_dsn) as admin:
        report = admin.backfill(name, instants[0], instants[-1], request_id="cut", batch_size=3)
    assert (report.admitted, report.already_run) == (len(instants) - 6, 6)
    assert [row[0] for row in backfilled(ql3_db, schedule_id)] == instants
    assert_clean(ql3_db)
