"""Database clock steps (PostgreSQL under libfaketime): back 30 s, forward 1 h, replicas running.

Back: the claim never takes a row whose stored time is later than its observation and the commit
fails closed, so nothing is written with a time earlier than what is already stored; after the
heal every occurrence is admitted exactly once. Forward: one hour of occurrences become due at
once and each misfire policy is applied as DESIGN §4 says (fire_once: the latest missed one only;
skip: none of the missed; catch_up: every one). A forward step cannot be healed without stepping
back again, so its heal is the clock running steadily on from the new time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psycopg
from expected import occurrences_between
from harness import CYCLE_SLACK_MS, SLACK, Bound, pause, sum_events, wait_until
from ql3_runtime_core import MisfirePolicy
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Replica, Scenario

LEASE_MS = 2_000
BACK_MS = -30_000
FORWARD_MS = 3_600_000
HOLD_S = 4.0
GRACE_MS = 5_000
CATCH_UP_CRON = "*/10 * * * * *"
PROXY_DELAY_MS = 150
# How much later than its claim a commit may land (its time is sampled when the commit statement
# runs): the slow replica's claim reply, BEGIN and its reply, and the commit statement's own
# messages are ~12 protocol messages, each held PROXY_DELAY_MS by the proxy (an empty claim
# round trip through a proxy is 8 messages); 30 allowed, then a cycle slack. Far below the hour
# of missed occurrences the skip check is about.
SLOW_LAG_MS = 30 * PROXY_DELAY_MS
COMMIT_LAG_MS = SLOW_LAG_MS + CYCLE_SLACK_MS
# A step of -30 s shows as a read ~30 s earlier than the one before; 5 s tells "stepped" from
# "not stepped" while leaving room for libfaketime picking the offset up a little late.
STEP_TOLERANCE_MS = 5_000
HELD_SQL = (
    "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    " FROM ql3.trigger_schedules WHERE claim_owner_id = %s LIMIT 1"
)
# Every session of the slow replica is outside a transaction: its commit has not begun.
SLOW_IDLE_SQL = (
    "SELECT count(*) FILTER (WHERE state IS DISTINCT FROM 'idle'), count(*)"
    " FROM pg_stat_activity WHERE application_name = %s"
)
# How many claims of the slow replica to try before giving up on freezing one (each try that
# lands on a commit already under way is given back; one in a handful is plenty).
FREEZE_TRIES = 20
# The clock is held back until the held commit fails closed; well inside the 30 s step, after
# which the held claim would expire by database time and the lease would decide instead.
REGRESSION_WAIT_S = 20


def _freeze_slow_with_claim(run: Scenario, proxy: WireFaultProxy, owner: str) -> int:
    """Partition the slow replica's proxy while it holds a claim its commit has not started on.

    Returns the database time at which the claim was seen held. Deterministic, not a race: once
    partitioned, nothing more of the slow replica reaches the server; a claim held while every
    one of its sessions is idle (outside a transaction) means its commit transaction has not
    begun, so the commit's clock reading will come after whatever the test does next. A try
    that caught a commit already under way heals the proxy and waits for the next claim.
    """
    with psycopg.connect(run.database.superuser_dsn, autocommit=True) as conn:
        for _ in range(FREEZE_TRIES):
            wait_until(
                lambda: bool(conn.execute(HELD_SQL, (owner,)).fetchone()),
                timeout_s=15,
                what=f"{owner} holds a claim",
                interval_s=0.002,
            )
            proxy.partition()
            held = conn.execute(HELD_SQL, (owner,)).fetchone()
            busy = conn.execute(SLOW_IDLE_SQL, (owner,)).fetchone()
            assert busy is not None
            if held is not None and int(busy[0]) == 0 and int(busy[1]) > 0:
                return int(held[0])
            proxy.heal()
            wait_until(
                lambda: not conn.execute(HELD_SQL, (owner,)).fetchone(),
                timeout_s=15,
                what=f"{owner} finishes the commit the partition caught",
            )
    msg = f"{owner}: no claim held with its commit not yet begun in {FREEZE_TRIES} tries"
    raise AssertionError(msg)


def _runs(run: Scenario, schedule_id: int, low: int, high: int) -> list[tuple[int, int]]:
    """(scheduled_for_ms, created_at_ms) of a schedule's runs with low < occurrence < high."""
    return [
        (int(row[0]), int(row[1]))
        for row in run.fetch_admin(
            "SELECT scheduled_for_ms, created_at_ms FROM ql3.runs WHERE schedule_id = %s"
            " AND scheduled_for_ms > %s AND scheduled_for_ms < %s ORDER BY scheduled_for_ms",
            (schedule_id, low, high),
        )
    ]


def _cursor(run: Scenario, schedule_id: int) -> int:
    rows = run.fetch_admin(
        "SELECT next_due_at_ms FROM ql3.trigger_schedules WHERE id = %s", (schedule_id,)
    )
    return int(rows[0][0])


def _check_catch_up_exact(run: Scenario, catch_up: int) -> None:
    """Require catch_up's runs to be cronsim's occurrences in [first cursor, cursor now).

    catch_up never skips an occurrence, across both clock steps.
    """
    definition, first = run.schedules[catch_up]
    cursor = _cursor(run, catch_up)
    want = [first, *occurrences_between(definition.cron, definition.timezone, first, cursor - 1)]
    got = [at for at, _ in _runs(run, catch_up, first - 1, cursor)]
    assert got == want, (
        f"catch_up admitted {len(got)} occurrences, cronsim names {len(want)} in [{first},"
        f" {cursor}): missing {sorted(set(want) - set(got))[:5]}, extra"
        f" {sorted(set(got) - set(want))[:5]}"
    )
    run.note(f"catch_up: {len(got)} runs = cronsim's {len(want)} occurrences before its cursor")


def _step_back_while_held(
    run: Scenario, proxy: WireFaultProxy, slow: Replica, steady: list[int]
) -> tuple[int, int]:
    """Step back 30 s while the slow replica holds a claim; return (backlog, back span) in ms.

    The held commit must fail closed; the clock comes back only after it has, plus a fault
    window for the two direct replicas, then the steady schedules run to their end.
    """
    cluster = run.cluster
    assert cluster is not None
    held_at = _freeze_slow_with_claim(run, proxy, slow.owner_id)
    before = run.now_ms()
    # How overdue the steady schedules already were (the slow replica's backlog): their oldest
    # cursor is the earliest occurrence not yet admitted when the clock steps.
    backlog_ms = max(0, before - min(_cursor(run, schedule) for schedule in steady))
    cluster.set_clock_offset_ms(BACK_MS)
    stepped_at = time.monotonic()
    stepped = run.now_ms()
    assert stepped < before + BACK_MS + STEP_TOLERANCE_MS, (
        f"clock did not step back: {before} -> {stepped}"
    )
    # Only now may the held commit reach the server: it runs under the stepped-back clock.
    proxy.heal()
    # Two direct replicas join only now: before, they would have won every claim.
    for _ in range(2):
        run.replica(lease_ms=LEASE_MS)
    run.fault(f"database clock stepped back 30 s for >= {HOLD_S:.0f} s")
    # The clock stays back until the held commit has failed closed. Nobody can take the claim
    # over meanwhile: its expiry (acquired + lease) lies 30 s - lease ahead of the stepped clock.
    wait_until(
        lambda: bool(slow.events("cycle.clock_regression")),
        timeout_s=REGRESSION_WAIT_S,
        what=f"{slow.owner_id}'s held commit fails closed on the step back",
    )
    pause(HOLD_S)  # the fault window the direct replicas run in (not a synchronisation)
    cluster.set_clock_offset_ms(0)
    back_ms = int((time.monotonic() - stepped_at) * 1000)
    healed = run.now_ms()
    assert healed > before, f"clock did not come back: {before} -> {healed}"
    wait_until(
        lambda: run.exhausted(steady), timeout_s=40, what="the steady schedules are exhausted"
    )
    regressions = sum_events(run.replicas, "cycle.clock_regression")
    run.note(
        f"{slow.owner_id} held a claim at database time {held_at} ms when the clock stepped"
        f" back; {regressions} cycle(s) failed closed on the regression; clock back {back_ms} ms;"
        f" steady backlog at the step {backlog_ms} ms"
    )
    return backlog_ms, back_ms


def test_database_clock_steps(scenario: Callable[[str, str], Scenario]) -> None:
    """Back 30 s fails closed and heals exactly; forward 1 h applies each misfire policy."""
    run = scenario("db-clock-steps", "2, 7")
    run.prepare(faketime=True)
    cluster = run.cluster
    assert cluster is not None
    # One replica talks through a slow proxy so that its claim-to-commit span is long enough
    # to step the clock back inside it: that commit must fail closed.
    proxy = WireFaultProxy(cluster.host, cluster.port).start()
    run.on_close(proxy.stop)
    proxy.set_delay_ms(PROXY_DELAY_MS)
    slow = run.replica(
        lease_ms=LEASE_MS, dsn=run.dsn("runtime", host="127.0.0.1", port=str(proxy.port))
    )
    run.wait_ready()
    steady = run.add_schedules(2, window_s=16, prefix="steady")
    horizon = 2 * FORWARD_MS / 1000
    fire_once, skip = (
        run.add_schedules(1, window_s=horizon, policy=policy, grace_ms=GRACE_MS, prefix=policy)[0]
        for policy in (MisfirePolicy.FIRE_ONCE, MisfirePolicy.SKIP)
    )
    (catch_up,) = run.add_schedules(
        1, window_s=horizon, cron=CATCH_UP_CRON, policy=MisfirePolicy.CATCH_UP, prefix="catchup"
    )
    backlog_ms, back_ms = _step_back_while_held(run, proxy, slow, steady)

    # -- forward 1 h -------------------------------------------------------------------------
    jump_from = run.now_ms()
    cluster.set_clock_offset_ms(FORWARD_MS)
    jumped = run.now_ms()
    assert jumped >= jump_from + FORWARD_MS, f"clock did not jump: {jump_from} -> {jumped}"
    run.fault("database clock stepped forward 1 h")
    target = jump_from + FORWARD_MS
    wait_until(
        lambda: all(_cursor(run, s) > target for s in (fire_once, skip, catch_up)),
        timeout_s=40,
        what="every policy schedule decided the jumped hour",
    )
    later = run.now_ms()
    assert later >= jumped, "the clock went back after the forward step"

    # fire_once: of the hour's missed occurrences only the latest one is admitted.
    missed_admitted = [
        (at, created)
        for at, created in _runs(run, fire_once, jump_from + 1_000, target + 60_000)
        if created - at > GRACE_MS
    ]
    assert len(missed_admitted) == 1, missed_admitted
    assert not _runs(run, fire_once, jump_from + 1_000, target - 60_000)
    # skip: none of the missed occurrences is admitted.
    assert not _runs(run, skip, jump_from + 1_000, target - 60_000)
    late_skips = [
        (at, created)
        for at, created in _runs(run, skip, jump_from, target + 60_000)
        if created - at > GRACE_MS + COMMIT_LAG_MS
    ]
    assert not late_skips, late_skips
    caught = _runs(run, catch_up, jump_from, target + 1)
    run.note(
        f"after +1 h: fire_once admitted 1 missed, skip 0 missed, catch_up {len(caught)}"
        " of the hour's */10 s occurrences"
    )
    # The steady schedules' lateness: the oldest occurrence not admitted at the step was already
    # `backlog` overdue (the slow replica's, measured at the step); nothing becomes due while the
    # clock is back, so it waits the whole back span (measured); after the heal the held claim
    # has expired (back span > lease) and whoever admits it takes at most one slow
    # claim-to-commit (the slow replica again) or one cycle (a direct replica).
    assert back_ms > LEASE_MS, f"the held claim had not expired at the heal: back {back_ms} ms"
    bound = Bound.of(
        ("slow backlog at the step (measured)", backlog_ms),
        ("clock held back (measured)", back_ms),
        ("slow claim-to-commit after the heal", SLOW_LAG_MS),
        SLACK,
    )
    outcome = run.finish(only=steady, bound=bound)
    assert outcome.report.ok
    _check_catch_up_exact(run, catch_up)
