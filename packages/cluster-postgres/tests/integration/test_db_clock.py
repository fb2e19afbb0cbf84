"""The database clock decides (DESIGN §3, §5): PostgreSQL under libfaketime, clock stepped live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import ClockRegressionError, CommitStatus
from repo_helpers import (
    command,
    db_now_ms,
    decide,
    fetch,
    history_counts,
    make_schedules,
    owner_conn,
)

if TYPE_CHECKING:
    from ql3_runtime_core import ClusterScheduleClaim
    from ql3_testkit import Ql3Database, ThrowawayCluster

_ROW = (
    "SELECT claim_owner_id, claim_token, claim_expires_at_ms, version, updated_at_ms,"
    " next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s"
)


def _row(dsn: str, claim: ClusterScheduleClaim) -> list[tuple[Any, ...]]:
    """Read the claimed schedule's claim and time columns (to show a statement left them)."""
    return fetch(dsn, _ROW, (claim.schedule_id,))


def test_commit_races_when_the_database_clock_passes_expiry(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Between claim and commit the DB clock jumps past the expiry: raced, nothing written."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(lease_ms=30_000), 1)
        row = _row(dsn, claim)
        faketime_cluster.set_clock_offset_ms(31_000)
        assert db_now_ms(dsn) >= claim.claim_expires_at_ms
        batch = repo.commit_decisions([decide(claim)])
    assert batch.outcomes[0].status is CommitStatus.RACED
    assert history_counts(faketime_db) == (0, 0, 0)
    assert _row(dsn, claim) == row


def test_commit_fails_closed_when_the_database_clock_steps_back(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """The DB clock steps back before the acquired time: ClockRegressionError, nothing written."""
    make_schedules(faketime_db, 2)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        claims = repo.claim_due_schedules(command(), 2)
        rows = [_row(dsn, claim) for claim in claims]
        faketime_cluster.set_clock_offset_ms(-60_000)
        with pytest.raises(ClockRegressionError) as caught:
            repo.commit_decisions([decide(claim) for claim in claims])
        assert caught.value.observed_at_ms < caught.value.claim_acquired_at_ms
        assert caught.value.schedule_id in {claim.schedule_id for claim in claims}
        assert history_counts(faketime_db) == (0, 0, 0)
        assert [_row(dsn, claim) for claim in claims] == rows
        faketime_cluster.set_clock_offset_ms(0)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert {outcome.status for outcome in batch.outcomes} == {CommitStatus.COMMITTED}


def test_every_durable_time_is_the_commit_sample(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """With the DB clock 5 s ahead, run, attempt, events and schedule carry the commit's sample."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        faketime_cluster.set_clock_offset_ms(5_000)
        before = db_now_ms(dsn)
        batch = repo.commit_decisions([decide(claim)])
        after = db_now_ms(dsn)
    sample = batch.outcomes[0].committed_at_ms
    assert sample is not None
    assert before <= sample <= after
    assert sample >= claim.claim_acquired_at_ms + 5_000
    (times,) = fetch(
        dsn,
        "SELECT (SELECT array_agg(DISTINCT created_at_ms) FROM ql3.runs)"
        " || (SELECT array_agg(DISTINCT created_at_ms) FROM ql3.attempts)"
        " || (SELECT array_agg(DISTINCT updated_at_ms) FROM ql3.attempts)"
        " || (SELECT array_agg(DISTINCT created_at_ms) FROM ql3.events)"
        " || (SELECT array_agg(DISTINCT updated_at_ms) FROM ql3.trigger_schedules)",
    )
    assert set(times[0]) == {sample}


def test_claim_never_writes_time_backwards(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A due row whose updated_at_ms is later than the (stepped back) DB clock is not claimed."""
    make_schedules(faketime_db, 1, shift_back_ms=120_000)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        repo.release_claims([claim])
        (row,) = _row(dsn, claim)
        faketime_cluster.set_clock_offset_ms(-30_000)
        assert db_now_ms(dsn) < row[4]
        assert db_now_ms(dsn) >= row[5]
        assert repo.claim_due_schedules(command("b"), 1) == []
        assert _row(dsn, claim) == [row]
        faketime_cluster.set_clock_offset_ms(0)
        assert len(repo.claim_due_schedules(command("b"), 1)) == 1


def test_release_leaves_a_claim_to_expire_when_the_clock_went_back(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Release never writes an earlier updated_at_ms: behind the acquired time it releases 0."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        row = _row(dsn, claim)
        faketime_cluster.set_clock_offset_ms(-10_000)
        assert repo.release_claims([claim]) == 0
        assert _row(dsn, claim) == row


def test_takeover_waits_for_expiry_by_the_database_clock(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Another owner takes a held claim exactly when the database clock passes its expiry."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as first, PostgresScheduleRepository(dsn) as second:
        (held,) = first.claim_due_schedules(command("a", lease_ms=60_000), 1)
        faketime_cluster.set_clock_offset_ms(30_000)
        assert second.claim_due_schedules(command("b"), 1) == []
        faketime_cluster.set_clock_offset_ms(61_000)
        (taken,) = second.claim_due_schedules(command("b"), 1)
    assert taken.claim_acquired_at_ms >= held.claim_expires_at_ms


def test_next_due_hint_moves_with_the_database_clock(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """The sleep hint is computed by the database clock: stepping it 10 min ahead shrinks it."""
    make_schedules(faketime_db, 1, cron="0 0 * * *", shift_back_ms=0)
    with PostgresScheduleRepository(faketime_db.dsn("runtime")) as repo:
        base = repo.next_due_in_ms()
        assert base is not None
        if base <= 700_000:  # the daily cursor is too close: move it a day further out
            with owner_conn(faketime_db) as conn:
                conn.execute(
                    "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms + 86400000"
                )
            base = repo.next_due_in_ms()
            assert base is not None
        faketime_cluster.set_clock_offset_ms(600_000)
        moved = repo.next_due_in_ms()
    assert moved is not None
    assert base - 600_000 - 5_000 <= moved <= base - 600_000 + 1_000


def test_one_transaction_fences_each_claim_on_the_same_sample(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A 20 s clock jump expires the 10 s claim but not the 60 s one: raced and committed."""
    make_schedules(faketime_db, 2)
    dsn = faketime_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as repo:
        (short,) = repo.claim_due_schedules(command(lease_ms=10_000), 1)
        (long,) = repo.claim_due_schedules(command(lease_ms=60_000), 1)
        faketime_cluster.set_clock_offset_ms(20_000)
        batch = repo.commit_decisions([decide(short), decide(long)])
    raced, committed = batch.outcomes
    assert (raced.status, committed.status) == (CommitStatus.RACED, CommitStatus.COMMITTED)
    assert committed.committed_at_ms is not None
    assert short.claim_expires_at_ms <= committed.committed_at_ms < long.claim_expires_at_ms
    assert {run.schedule_id for run in committed.runs} == {long.schedule_id}
    assert fetch(dsn, "SELECT DISTINCT schedule_id FROM ql3.runs") == [(long.schedule_id,)]


def _frozen_second(dsn: str) -> int:
    """Return a whole database second a little ahead of now, to freeze the clock on."""
    return (db_now_ms(dsn) // 1000 + 2) * 1000


def test_commit_exactly_at_the_expiry_instant_is_raced(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """The fence is strict: a commit sampling the expiry instant races; 1 ms earlier commits."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    acquired = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(acquired)
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(lease_ms=10_000), 1)
        assert claim.claim_acquired_at_ms == acquired
        assert claim.claim_expires_at_ms == acquired + 10_000
        faketime_cluster.freeze_clock_at_ms(claim.claim_expires_at_ms)
        at_expiry = repo.commit_decisions([decide(claim)])
        assert at_expiry.outcomes[0].status is CommitStatus.RACED
        assert history_counts(faketime_db) == (0, 0, 0)
        faketime_cluster.freeze_clock_at_ms(claim.claim_expires_at_ms - 1)
        before = repo.commit_decisions([decide(claim)])
    assert before.outcomes[0].status is CommitStatus.COMMITTED
    assert before.outcomes[0].committed_at_ms == claim.claim_expires_at_ms - 1


def test_takeover_happens_exactly_at_the_expiry_instant(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A takeover is `expires <= observation`: not 1 ms before the expiry, exactly at it."""
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    acquired = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(acquired)
    with PostgresScheduleRepository(dsn) as first, PostgresScheduleRepository(dsn) as second:
        (held,) = first.claim_due_schedules(command("a", lease_ms=5_000), 1)
        faketime_cluster.freeze_clock_at_ms(held.claim_expires_at_ms - 1)
        assert second.claim_due_schedules(command("b"), 1) == []
        faketime_cluster.freeze_clock_at_ms(held.claim_expires_at_ms)
        (taken,) = second.claim_due_schedules(command("b"), 1)
    assert taken.claim_acquired_at_ms == held.claim_expires_at_ms


def test_an_occurrence_is_due_exactly_at_its_instant(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Due-ness is `cursor <= observation`: nothing 1 ms before the cursor, the claim at it."""
    (schedule_id,) = make_schedules(faketime_db, 1, shift_back_ms=0)
    dsn = faketime_db.dsn("runtime")
    ((cursor,),) = fetch(
        dsn, "SELECT next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s", (schedule_id,)
    )
    with PostgresScheduleRepository(dsn) as repo:
        faketime_cluster.freeze_clock_at_ms(cursor - 1)
        assert repo.claim_due_schedules(command(), 1) == []
        faketime_cluster.freeze_clock_at_ms(cursor)
        (claim,) = repo.claim_due_schedules(command(), 1)
        outcome = repo.commit_decisions([decide(claim)]).outcomes[0]
    assert claim.claim_acquired_at_ms == cursor
    assert [run.scheduled_for_ms for run in outcome.runs] == [cursor]


def test_a_row_written_at_the_observed_instant_is_released_and_claimed_at_it(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Claim and release refuse only rows written after their observation, not at it.

    The guard exists for a clock stepped back (a row from the future is left alone), so with the
    clock frozen on one millisecond a claim, its release and a new claim all happen in it.
    """
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    instant = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(instant)
    with PostgresScheduleRepository(dsn) as repo:
        first = repo.claim_due_schedules(command("a"), 1)
        assert [claim.claim_acquired_at_ms for claim in first] == [instant]
        assert repo.release_claims(first) == 1
        assert _row(dsn, first[0])[0][4] == instant
        again = repo.claim_due_schedules(command("b"), 1)
    assert [(claim.schedule_id, claim.claim_acquired_at_ms) for claim in again] == [
        (first[0].schedule_id, instant)
    ]


def test_a_commit_in_the_claims_own_millisecond_is_not_a_regression(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Only a clock earlier than the claim's acquired time is a regression, not the same instant.

    With the clock frozen on one millisecond, the claim and its commit sample the same time; the
    commit must land (the promise under test is that this call succeeds).
    """
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    instant = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(instant)
    with PostgresScheduleRepository(dsn) as repo:
        claims = repo.claim_due_schedules(command(), 1)
        try:
            batch = repo.commit_decisions([decide(claim) for claim in claims])
        except ClockRegressionError as exc:
            pytest.fail(f"a commit at the claim's own instant was taken for a regression: {exc}")
    assert [(o.status, o.committed_at_ms) for o in batch.outcomes] == [
        (CommitStatus.COMMITTED, instant)
    ]


def test_a_claim_is_quarantined_in_its_own_millisecond(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """Quarantine refuses only a row written after its observation, not one written at it.

    Like claim and release, the guard is there for a clock stepped back; with the clock frozen
    on one millisecond the claim and its quarantine share it, and the quarantine must land.
    """
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    instant = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(instant)
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        quarantined = repo.quarantine_claims([(claim, "undecidable: same-instant test")])
    assert claim.claim_acquired_at_ms == instant
    assert [(row.schedule_id, row.quarantined_at_ms) for row in quarantined] == [
        (claim.schedule_id, instant)
    ]
    ((owner, state),) = fetch(
        dsn,
        "SELECT claim_owner_id, state FROM ql3.trigger_schedules WHERE id = %s",
        (claim.schedule_id,),
    )
    assert (owner, state) == (None, "invalid")


def test_a_release_stamps_its_own_instant_and_no_earlier_claim_takes_the_row(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A release writes its observation as the row's last write; an earlier clock cannot claim it.

    Claimed at T, released at T + 500 ms: the row now says T + 500. A clock stepped back to
    T + 200 must not claim it (the row was written in that clock's future); at T + 500 it can.
    """
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    instant = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(instant)
    with PostgresScheduleRepository(dsn) as repo:
        first = repo.claim_due_schedules(command("a"), 1)
        faketime_cluster.freeze_clock_at_ms(instant + 500)
        assert repo.release_claims(first) == 1
        assert _row(dsn, first[0])[0][4] == instant + 500
        faketime_cluster.freeze_clock_at_ms(instant + 200)
        assert repo.claim_due_schedules(command("b"), 1) == []
        faketime_cluster.freeze_clock_at_ms(instant + 500)
        again = repo.claim_due_schedules(command("b"), 1)
    assert [(claim.schedule_id, claim.claim_acquired_at_ms) for claim in again] == [
        (first[0].schedule_id, instant + 500)
    ]


def test_a_quarantine_leaves_a_row_written_in_its_future(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster
) -> None:
    """A clock stepped back below the claim's write time quarantines nothing; the claim stays.

    The row says it was written at T; a quarantine observing T - 500 ms would write it
    backwards, so it is left to expire as a release would leave it.
    """
    make_schedules(faketime_db, 1)
    dsn = faketime_db.dsn("runtime")
    instant = _frozen_second(dsn)
    faketime_cluster.freeze_clock_at_ms(instant)
    with PostgresScheduleRepository(dsn) as repo:
        (claim,) = repo.claim_due_schedules(command(), 1)
        faketime_cluster.freeze_clock_at_ms(instant - 500)
        quarantined = repo.quarantine_claims([(claim, "undecidable: clock stepped back")])
        faketime_cluster.freeze_clock_at_ms(instant)
    assert quarantined == ()
    ((owner, state),) = fetch(
        dsn,
        "SELECT claim_owner_id, state FROM ql3.trigger_schedules WHERE id = %s",
        (claim.schedule_id,),
    )
    assert (owner, state) == (claim.owner_id, "active")
