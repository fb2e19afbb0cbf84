"""Database clock steps (PostgreSQL under libfaketime): back 30 s, forward 1 h, replicas running.

Back: the claim never takes a row whose stored time is later than its observation and the commit
fails closed, so nothing is written with a time earlier than what is already stored; after the
heal every occurrence is admitted exactly once. Forward: one hour of occurrences become due at
once and each misfire policy is applied as SPEC §6 says (fire_once: the latest missed one only;
skip: none of the missed; catch_up: every one). A forward step cannot be healed without stepping
back again, so its heal is the clock running steadily on from the new time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
from expected import occurrences_between
from harness import CYCLE_SLACK_MS, pause, sum_events, wait_until
from ql3_runtime_core import MisfirePolicy
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

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
COMMIT_LAG_MS = 30 * PROXY_DELAY_MS + CYCLE_SLACK_MS
# A step of -30 s shows as a read ~30 s earlier than the one before; 5 s tells "stepped" from
# "not stepped" while leaving room for libfaketime picking the offset up a little late.
STEP_TOLERANCE_MS = 5_000
HELD_SQL = "SELECT 1 FROM ql3.trigger_schedules WHERE claim_owner_id = %s"


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
    # -- back 30 s, while the slow replica holds a claim -------------------------------------
    with psycopg.connect(run.dsn("admin"), autocommit=True) as conn:
        wait_until(
            lambda: bool(conn.execute(HELD_SQL, (slow.owner_id,)).fetchone()),
            timeout_s=15,
            what=f"{slow.owner_id} holds a claim",
            interval_s=0.002,
        )
        before = run.now_ms()
        cluster.set_clock_offset_ms(BACK_MS)
    # Two direct replicas join only now: before, they would have won every claim.
    for _ in range(2):
        run.replica(lease_ms=LEASE_MS)
    stepped = run.now_ms()
    assert stepped < before + BACK_MS + STEP_TOLERANCE_MS, (
        f"clock did not step back: {before} -> {stepped}"
    )
    run.fault("database clock stepped back 30 s for 4 s")
    pause(HOLD_S)
    cluster.set_clock_offset_ms(0)
    healed = run.now_ms()
    assert healed > before, f"clock did not come back: {before} -> {healed}"
    wait_until(
        lambda: run.exhausted(steady), timeout_s=40, what="the steady schedules are exhausted"
    )
    regressions = sum_events(run.replicas, "cycle.clock_regression")
    run.note(f"{regressions} cycle(s) failed closed on the regression")
    assert regressions >= 1, f"no commit failed closed on the step back\n{run.logs()}"

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
    outcome = run.finish(only=steady)
    assert outcome.report.ok
    _check_catch_up_exact(run, catch_up)
