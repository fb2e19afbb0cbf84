"""The overlap policy decided by the worker's take (migration 0009, DESIGN §10), on real PostgreSQL.

Two due Runs of one schedule are admitted as the Coordinator admits them (catch_up, one commit);
workers take through `WorkerIngress` as ql3_worker_ingress. Races are made real, not hoped for:
a third session holds the schedule's advisory lock until both takes have picked their attempt and
wait on it, then lets them decide one after the other. Everything asserted is read back from the
database.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import psycopg
from ingress_helpers import LEASE_MS, attempts_of, events_of, rows, take
from ql3_cluster_postgres import (
    HistoryReader,
    PostgresScheduleRepository,
    ScheduleAdmin,
    WorkerIngress,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    AttemptState,
    OverlapPolicy,
    TakenAttempt,
    TaskExecution,
)
from repo_helpers import command, db_now_ms, decide, make_schedules, owner_conn, wait_until
from verify_compare import checked_verify

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ql3_testkit import Ql3Database, ThrowawayCluster


def _execution(overlap: OverlapPolicy, max_running: int | None = None) -> TaskExecution:
    return TaskExecution(
        command="true",
        max_attempts=1,
        timeout_ms=60_000,
        retry_backoff_ms=0,
        overlap=overlap,
        max_running=max_running,
    )


def _two_due_runs(db: Ql3Database, execution: TaskExecution) -> tuple[int, list[int]]:
    """One every-second catch_up schedule 3 s behind, two of its occurrences admitted at once."""
    (schedule_id,) = make_schedules(db, 1, shift_back_ms=3_000, execution=execution)
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim, budget=2)])
    run_ids = sorted(run.run_id for outcome in batch.outcomes for run in outcome.runs)
    assert len(run_ids) == 2
    return schedule_id, run_ids


def _state(db: Ql3Database, run_id: int) -> str:
    return str(attempts_of(db, run_id)[-1]["state"])


def _overlap_skips(db: Ql3Database) -> list[dict[str, Any]]:
    return rows(
        db.dsn("admin"),
        "SELECT schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, created_at_ms"
        " FROM ql3.skipped_occurrences WHERE reason = 'overlap' ORDER BY id",
    )


def _scheduled_for(db: Ql3Database, run_id: int) -> int:
    statement = "SELECT scheduled_for_ms FROM ql3.runs WHERE id = %s"
    ((row),) = rows(db.dsn("admin"), statement, (run_id,))
    return int(row["scheduled_for_ms"])


@contextlib.contextmanager
def _takes_waiting_on(
    db: Ql3Database, schedule_id: int, takes: Sequence[Callable[[], None]], what: str
) -> Iterator[None]:
    """Hold a schedule's overlap lock while `takes` start, each on a thread, and wait on it.

    The block runs with every take waiting on the lock (seen in pg_locks); leaving it releases
    the lock and joins the threads. What a take raised is raised again here.
    """
    errors: list[BaseException] = []

    def run(one: Callable[[], None]) -> None:
        try:
            one()
        except BaseException as exc:  # noqa: BLE001  # raised again in the test's thread
            errors.append(exc)

    key = "SELECT pg_advisory_{}(hashtextextended('ql3.overlap:' || %s::bigint, 0))"
    waiting = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    with owner_conn(db) as holder:
        holder.execute(key.format("lock"), (schedule_id,))
        threads = [threading.Thread(target=run, args=(one,)) for one in takes]
        for thread in threads:
            thread.start()
        try:
            wait_until(lambda: rows(db.dsn("owner"), waiting)[0]["n"] == len(takes), what=what)
            yield
        finally:
            holder.execute(key.format("unlock"), (schedule_id,))
            for thread in threads:
                thread.join(timeout=30)
    if errors:
        raise errors[0]


def _race(db: Ql3Database, schedule_id: int, workers: int) -> list[list[TakenAttempt]]:
    """Have `workers` takes (limit 1 each) pick their attempt, wait on the lock, then decide."""
    results: list[list[TakenAttempt]] = [[] for _ in range(workers)]

    def one(index: int) -> None:
        with WorkerIngress(db.dsn("worker_ingress")) as ingress:
            results[index] = take(ingress, limit=1, worker_id=f"worker-{index}")

    takes = [functools.partial(one, index) for index in range(workers)]
    with _takes_waiting_on(
        db, schedule_id, takes, f"{workers} takes waiting on the schedule's lock"
    ):
        pass
    return results


def test_skip_two_racing_takes_execute_one_and_record_the_other(ql3_db: Ql3Database) -> None:
    """Two workers decide two due Runs of a skip schedule: one runs, one is skipped and recorded."""
    schedule_id, (older, newer) = _two_due_runs(ql3_db, _execution(OverlapPolicy.SKIP))
    results = _race(ql3_db, schedule_id, 2)
    taken = [attempt for result in results for attempt in result]
    assert [a.run_id for a in taken] == [older]
    assert _state(ql3_db, older) == "running"
    (skipped,) = attempts_of(ql3_db, newer)
    assert skipped["state"] == "skipped"
    assert skipped["started_at_ms"] is None
    assert skipped["worker_login"] is None
    assert skipped["finished_at_ms"] >= skipped["created_at_ms"]
    kinds = [e["kind"] for e in events_of(ql3_db, newer)]
    assert kinds == ["attempt.queued", "attempt.skipped"]
    (record,) = _overlap_skips(ql3_db)
    occurrence = _scheduled_for(ql3_db, newer)
    assert record == {
        "schedule_id": schedule_id,
        "first_skipped_ms": occurrence,
        "last_skipped_ms": occurrence,
        "skipped_count": 1,
        "created_at_ms": skipped["finished_at_ms"],
    }
    # A skipped Run is final: nothing is left to take, and no successor was queued.
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert take(ingress) == []
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    assert report.overlap_skipped == 1
    with HistoryReader(ql3_db.dsn("admin")) as reader:
        counts = reader.attempt_counts()
        (newest, _) = reader.recent_runs()
    assert (counts.running, counts.skipped, counts.cancelled) == (1, 1, 0)
    assert (newest.run_id, newest.state) == (newer, AttemptState.SKIPPED)


def test_replace_cancels_the_oldest_running_attempt(ql3_db: Ql3Database) -> None:
    """Under replace the newer Run executes; the older one's attempt ends cancelled, for good."""
    _, (older, newer) = _two_due_runs(ql3_db, _execution(OverlapPolicy.REPLACE))
    first_token, second_token = uuid4(), uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (first,) = take(ingress, first_token, limit=1)
        assert first.run_id == older
        (second,) = take(ingress, second_token, limit=1, worker_id="worker-b")
        assert second.run_id == newer
        (cancelled,) = attempts_of(ql3_db, older)
        assert cancelled["state"] == "cancelled"
        assert cancelled["lease_token"] is None
        assert cancelled["finished_at_ms"] == second.taken_at_ms
        # The older attempt's worker learns it at its next renewal, and its finish is refused.
        assert ingress.renew_leases(first_token, [first.attempt_id], LEASE_MS) == {}
        finished = ingress.finish_attempt(
            first.attempt_id, first_token, AttemptResult(outcome=AttemptOutcome.SUCCEEDED)
        )
    assert not finished.recorded
    assert finished.state_found is AttemptState.CANCELLED
    assert _state(ql3_db, older) == "cancelled"
    events = events_of(ql3_db, older)
    assert [e["kind"] for e in events] == ["attempt.queued", "attempt.running", "attempt.cancelled"]
    assert events[-1]["payload"]["replaced_by_run_id"] == newer
    assert _overlap_skips(ql3_db) == []
    # The cancelled attempt ended at the very instant its replacement started: never two at once.
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    with HistoryReader(ql3_db.dsn("admin")) as reader:
        counts = reader.attempt_counts()
    assert (counts.running, counts.skipped, counts.cancelled) == (1, 0, 1)


def test_allow_with_a_cap_leaves_the_second_queued_until_the_first_ends(
    ql3_db: Ql3Database,
) -> None:
    """Under allow with max_running 1 the second Run waits (queued, untaken) while one runs."""
    _, (older, newer) = _two_due_runs(ql3_db, _execution(OverlapPolicy.ALLOW, 1))
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert [a.run_id for a in take(ingress, token)] == [older]
        assert take(ingress, uuid4(), worker_id="worker-b") == []
        assert _state(ql3_db, newer) == "queued"
        ingress.finish_attempt(
            attempt_id=attempts_of(ql3_db, older)[0]["id"],
            lease_token=token,
            result=AttemptResult(outcome=AttemptOutcome.SUCCEEDED, exit_code=0),
        )
        assert [a.run_id for a in take(ingress, uuid4(), worker_id="worker-b")] == [newer]
    assert _overlap_skips(ql3_db) == []
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()


def test_a_running_manual_run_counts_as_live(ql3_db: Ql3Database) -> None:
    """A triggered Run that runs makes the cron Run due next skip, with its record."""
    (schedule_id,) = make_schedules(
        ql3_db, 1, shift_back_ms=1_500, execution=_execution(OverlapPolicy.SKIP)
    )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        (record,) = admin.list_schedules()
        manual = admin.trigger_run(record.name, "overlap-manual-1")
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert [a.run_id for a in take(ingress)] == [manual.run_id]
        with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
            (claim,) = repo.claim_due_schedules(command(), 4)
            batch = repo.commit_decisions([decide(claim, budget=1)])
        (cron_run,) = [run.run_id for outcome in batch.outcomes for run in outcome.runs]
        assert take(ingress) == []
    assert _state(ql3_db, cron_run) == "skipped"
    (skip,) = _overlap_skips(ql3_db)
    assert (skip["schedule_id"], skip["first_skipped_ms"]) == (
        schedule_id,
        _scheduled_for(ql3_db, cron_run),
    )


def test_a_skipped_manual_run_gets_no_skip_record(ql3_db: Ql3Database) -> None:
    """A manual Run is no occurrence: skipped for overlap, it leaves its attempt's end only."""
    make_schedules(ql3_db, 1, shift_back_ms=1_500, execution=_execution(OverlapPolicy.SKIP))
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim, budget=1)])
    (cron_run,) = [run.run_id for outcome in batch.outcomes for run in outcome.runs]
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert [a.run_id for a in take(ingress)] == [cron_run]
        with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
            (record,) = admin.list_schedules()
            manual = admin.trigger_run(record.name, "overlap-manual-2")
        assert take(ingress) == []
    assert _state(ql3_db, manual.run_id) == "skipped"
    assert _overlap_skips(ql3_db) == []


def test_the_default_policy_takes_every_due_run_at_once(ql3_db: Ql3Database) -> None:
    """The default, allow without a cap, is the behaviour before overlap existed."""
    _, run_ids = _two_due_runs(ql3_db, _execution(OverlapPolicy.ALLOW))
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert sorted(a.run_id for a in take(ingress)) == run_ids


def test_the_worker_role_can_no_longer_take_through_v1(ql3_db: Ql3Database) -> None:
    """A v1 take would start a Run without the overlap decision: refused to the worker role."""
    with psycopg.connect(ql3_db.dsn("worker_ingress"), autocommit=True) as conn:
        try:
            conn.execute(
                "SELECT * FROM ql3.worker_take_attempts_v1('w', gen_random_uuid(), 5000, 1,"
                " '{}', true)"
            )
        except psycopg.errors.InsufficientPrivilege:
            return
    msg = "worker_take_attempts_v1 is still executable by ql3_worker_ingress"
    raise AssertionError(msg)


def test_replace_within_one_take_cancels_the_older_before_it_starts(ql3_db: Ql3Database) -> None:
    """One take holding both due Runs of a replace schedule starts the newer only."""
    _, (older, newer) = _two_due_runs(ql3_db, _execution(OverlapPolicy.REPLACE))
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        assert [a.run_id for a in take(ingress)] == [newer]
    (cancelled,) = attempts_of(ql3_db, older)
    assert (cancelled["state"], cancelled["started_at_ms"]) == ("cancelled", None)
    assert [e["kind"] for e in events_of(ql3_db, older)] == ["attempt.queued", "attempt.cancelled"]
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()


def test_a_slot_freed_while_the_take_waited_is_used_after_its_end(ql3_db: Ql3Database) -> None:
    """A Run started in a slot freed while its take waited starts after the end that freed it.

    The take read its clock, then waited for the lock while the running Run finished; the next
    Run's start (database time) is no earlier than that finish, so verify sees no overlap.
    """
    schedule_id, (older, newer) = _two_due_runs(ql3_db, _execution(OverlapPolicy.SKIP))
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        (first,) = take(ingress, token, limit=1)
    assert first.run_id == older
    taken: list[TakenAttempt] = []

    def waiting_take() -> None:
        with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
            taken.extend(take(ingress, limit=1, worker_id="worker-b"))

    with _takes_waiting_on(
        ql3_db, schedule_id, [waiting_take], "the take waiting on the schedule's lock"
    ):
        with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
            done = ingress.finish_attempt(
                first.attempt_id, token, AttemptResult(outcome=AttemptOutcome.SUCCEEDED)
            )
        assert done.recorded
    (second,) = taken
    assert second.run_id == newer
    assert done.finished_at_ms is not None
    assert second.taken_at_ms >= done.finished_at_ms
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()


def test_a_cap_counts_only_its_own_schedules_queued_runs(ql3_db: Ql3Database) -> None:
    """An older queued Run of another schedule, which this take passes over, holds no slot.

    Schedule `u` (no cap) has a due Run admitted before the one of `c` (allow, max_running 1),
    and a third session holds `u`'s attempt (FOR UPDATE), so the take skips it (SKIP LOCKED) and
    picks `c`'s. The cap counts the queued Runs ahead of `c`'s that this take does not hold: of
    `c` only, so `c`'s Run starts and `u`'s stays queued.
    """
    make_schedules(ql3_db, 1, prefix="u", shift_back_ms=1_500)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        (u_run,) = [
            r.run_id for o in repo.commit_decisions([decide(claim, 1)]).outcomes for r in o.runs
        ]
    (capped,) = make_schedules(
        ql3_db, 1, prefix="c", shift_back_ms=1_500, execution=_execution(OverlapPolicy.ALLOW, 1)
    )
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 4)
        (claim,) = [c for c in claims if c.schedule_id == capped]
        (c_run,) = [
            r.run_id for o in repo.commit_decisions([decide(claim, 1)]).outcomes for r in o.runs
        ]
    (u_attempt,) = attempts_of(ql3_db, u_run)
    (c_attempt,) = attempts_of(ql3_db, c_run)
    assert u_attempt["created_at_ms"] < c_attempt["created_at_ms"], (u_attempt, c_attempt)
    with psycopg.connect(ql3_db.dsn("owner")) as holder:
        holder.execute("SELECT id FROM ql3.attempts WHERE id = %s FOR UPDATE", (u_attempt["id"],))
        with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
            assert [a.run_id for a in take(ingress)] == [c_run]
        holder.rollback()
    assert (_state(ql3_db, u_run), _state(ql3_db, c_run)) == ("queued", "running")


def test_replace_counts_a_waiting_retry_of_the_same_take_once(ql3_db: Ql3Database) -> None:
    """A retry that waits in the take fills one slot: replace frees the others for the new Run.

    Replace, max_running 2, two attempts each. Runs p, x and w are admitted together; another
    worker takes p and x, and x fails, so its retry is queued after w. Run y is admitted last.
    One take then picks w, the retry and y, in that order: w starts (p runs: 2 of 2), the
    retry waits (a retry is never replaced) and fills one slot, and y, replace's first attempt,
    cancels what runs until it fits: p and w, which this take picked but never started.
    """
    execution = TaskExecution(
        command="true",
        max_attempts=2,
        timeout_ms=60_000,
        retry_backoff_ms=0,
        overlap=OverlapPolicy.REPLACE,
        max_running=2,
    )
    make_schedules(ql3_db, 1, shift_back_ms=4_000, execution=execution)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        (claim,) = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim, budget=3)])
    run_p, run_x, run_w = sorted(r.run_id for o in batch.outcomes for r in o.runs)
    other = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        running = take(ingress, other, limit=2, worker_id="worker-b")
        assert sorted(a.run_id for a in running) == [run_p, run_x]
        (failing,) = [a for a in running if a.run_id == run_x]
        failed = ingress.finish_attempt(
            failing.attempt_id, other, AttemptResult(outcome=AttemptOutcome.FAILED, exit_code=1)
        )
        assert failed.next_attempt_id is not None
        with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
            (claim,) = repo.claim_due_schedules(command(), 4)
            batch = repo.commit_decisions([decide(claim, budget=1)])
        (run_y,) = [r.run_id for o in batch.outcomes for r in o.runs]
        assert [a.run_id for a in take(ingress)] == [run_y]
    states = {run_id: _state(ql3_db, run_id) for run_id in (run_p, run_x, run_w, run_y)}
    assert states == {
        run_p: "cancelled",
        run_x: "queued",
        run_w: "cancelled",
        run_y: "running",
    }
    (never_started,) = attempts_of(ql3_db, run_w)
    assert never_started["started_at_ms"] is None
    # A start is the attempt's latest change: its updated time moves with it.
    (started,) = attempts_of(ql3_db, run_y)
    assert started["updated_at_ms"] == started["started_at_ms"] >= never_started["finished_at_ms"]


def test_a_queued_run_due_at_the_takes_own_millisecond_holds_its_slot(
    faketime_cluster: ThrowawayCluster, faketime_db: Ql3Database
) -> None:
    """A Run ahead that became due at the very millisecond of the take still counts as ahead.

    Allow with max_running 1, two due Runs admitted in one commit with the database clock frozen,
    so both became eligible at the instant the take reads. A third session holds the older
    attempt (FOR UPDATE), so the take skips it and picks the newer: the older is due (eligible
    <= now, equal here) and ahead, it fills the one slot, and the newer must stay queued. Once
    the holder lets go, the older one is taken (the control: the cap lets exactly one start).
    """
    now_ms = db_now_ms(faketime_db.dsn("owner"))
    faketime_cluster.freeze_clock_at_ms(now_ms)
    _, (older, newer) = _two_due_runs(faketime_db, _execution(OverlapPolicy.ALLOW, 1))
    (held,) = attempts_of(faketime_db, older)
    (picked,) = attempts_of(faketime_db, newer)
    assert (held["created_at_ms"], picked["created_at_ms"]) == (now_ms, now_ms)
    assert held["id"] < picked["id"]
    with (
        owner_conn(faketime_db) as holder,
        WorkerIngress(faketime_db.dsn("worker_ingress")) as ingress,
    ):
        with holder.transaction():
            holder.execute("SELECT id FROM ql3.attempts WHERE id = %s FOR UPDATE", (held["id"],))
            assert take(ingress) == []
        assert [a.run_id for a in take(ingress)] == [older]
    assert (_state(faketime_db, older), _state(faketime_db, newer)) == ("running", "queued")


def test_a_replace_in_a_take_keeps_each_schedules_decision_time(ql3_db: Ql3Database) -> None:
    """Each Run a take starts starts at its own schedule's decision time, not another's.

    Three schedules admitted in one commit: `z` (allow, max_running 5: decided under the lock),
    `a` (replace, max_running 1, two due Runs) and `b` (allow, max_running 1); ids in that order,
    the order the take decides them in. One take picks all four attempts: z's starts, a's older
    one is picked and then cancelled by a's newer one (replace), and b's starts. A third session
    holds `b`'s lock while the database clock moves on, so `b` is decided later than `a`: a's
    newer Run starts at a's decision (no later than the moment the take was seen waiting), b's at
    b's (no earlier than the lock's release), and z's at the cancellation's time, the floor of
    every start in the take.
    """
    schedules = {
        prefix: make_schedules(ql3_db, 1, prefix=prefix, shift_back_ms=3_000, execution=execution)[
            0
        ]
        for prefix, execution in (
            ("z", _execution(OverlapPolicy.ALLOW, 5)),
            ("a", _execution(OverlapPolicy.REPLACE, 1)),
            ("b", _execution(OverlapPolicy.ALLOW, 1)),
        )
    }
    assert schedules["z"] < schedules["a"] < schedules["b"], schedules
    budgets = {schedules["z"]: 1, schedules["a"]: 2, schedules["b"]: 1}
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(c, budgets[c.schedule_id]) for c in claims])
    runs = {o.schedule_id: sorted(r.run_id for r in o.runs) for o in batch.outcomes}
    (z_run,), (a_older, a_newer), (b_run,) = (runs[schedules[p]] for p in "zab")
    taken: list[TakenAttempt] = []

    def waiting_take() -> None:
        with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
            taken.extend(take(ingress))

    with _takes_waiting_on(ql3_db, schedules["b"], [waiting_take], "the take waiting on b's lock"):
        seen_waiting_ms = db_now_ms(ql3_db.dsn("owner"))
        wait_until(
            lambda: db_now_ms(ql3_db.dsn("owner")) > seen_waiting_ms + 1,
            what="the database clock to move on",
        )
        released_ms = db_now_ms(ql3_db.dsn("owner"))
    started = {a.run_id: a.taken_at_ms for a in taken}
    assert sorted(started) == sorted([z_run, a_newer, b_run]), taken
    (cancelled,) = attempts_of(ql3_db, a_older)
    assert (cancelled["state"], cancelled["started_at_ms"]) == ("cancelled", None)
    assert started[a_newer] == cancelled["finished_at_ms"] <= seen_waiting_ms
    assert started[z_run] == started[a_newer]
    assert started[b_run] >= released_ms > seen_waiting_ms
    report = checked_verify(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
