"""Switching zone rules under running replicas: `ql3 zone-rules adopt` loses nothing.

The database first records `2000a`, a made-up zone rules version in which America/New_York holds
Asia/Tokyo's rules (13 to 14 hours apart from the real ones), with its rule data, as if another
node had adopted it. Three real `ql3 run` replicas load it from the database and admit two kinds
of every-second schedules: New York ones limited to the current and next Tokyo hour (due now
under 2000a, hours away under the real rules) and UTC ones (the same under both). Two of the New
York schedules are paused for two seconds of database time before the switch, so the old rules
certainly have occurrences due that nobody decided. While the replicas run, the real
`ql3 zone-rules adopt` CLI switches to this node's tzdata.

Judged from the database, with the independent engine (cronsim over zoneinfo instants, New York
under 2000a being Tokyo): every New York occurrence of 2000a up to the instant the switch took
effect is exactly one run or lies inside exactly one `zone_rules_changed` skip record naming
both versions (counts checked by cronsim), none after it (the new rules have none in the
window); every UTC occurrence is exactly one run; none early; `verify_history` clean.

Lateness: the adopt fences every claim standing when it commits (its commit races and writes
nothing), so the occurrences such a claim held wait until its holder hands it back (at once) or,
should that replica stop meanwhile, for its lease to expire by database time, and are then taken
within one cycle slack. A replica blocked on the switch's lock meanwhile holds
nothing up for longer: its claims expire on their own. The bound is lease + cycle slack.

A claim standing when the adopt commits (a race of a few milliseconds a second) is fenced by a
bump of its row's version (the adopt runs as `ql3_admin`, which may not write claim columns), and
the adopt moves that New York schedule's cursor hours ahead. Its holder's commit races, and the
holder hands the claim back at once (`claims.raced_released`: the release compares the grant,
not the version). Nothing claims the row again before it is next due, so a claim not handed back
would stay on it, expired, and both checkers would report it (`stale_claim`): the scenario counts
the hand-backs from the replicas' logs and asserts that no claim stands at the end.
"""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from expected import occurrences_between
from harness import SLACK, Bound, fetch, ql3_executable, wait_until
from ql3_cluster_postgres import ScheduleAdmin, adopt_zone_rules, read_zone_rule_history
from ql3_runtime_core import wheel_zone_data, zone_rules_version

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

MADE_UP = "2000a"
NEW_YORK = "America/New_York"
TOKYO = "Asia/Tokyo"
LEASE_MS = 2_000
WINDOW_S = 16.0
SCHEDULES = 4
PAUSED = 2
PAUSE_MS = 2_000
BOUND = Bound.of(("lease of a claim the adopt fenced", LEASE_MS), SLACK)
SKIPS_SQL = (
    "SELECT schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason,"
    " zone_rules_from, zone_rules_to FROM ql3.skipped_occurrences ORDER BY id"
)
RUNS_SQL = "SELECT schedule_id, scheduled_for_ms FROM ql3.runs"
STANDING_CLAIMS_SQL = (
    "SELECT id, claim_expires_at_ms, next_due_at_ms FROM ql3.trigger_schedules"
    " WHERE claim_token IS NOT NULL ORDER BY id"
)


def _made_up_data() -> dict[str, bytes]:
    data = wheel_zone_data()
    data[NEW_YORK] = data[TOKYO]
    return data


def _tokyo_hours(now_ms: int) -> str:
    hour = datetime.fromtimestamp(now_ms / 1000, UTC).astimezone(ZoneInfo(TOKYO)).hour
    return f"{hour},{(hour + 1) % 24}"


def _adopt_with_the_cli(run: Scenario) -> tuple[str, float]:
    """Run the real `ql3 zone-rules adopt`; return its output and how long it took (monotonic)."""
    started = time.monotonic()
    result = subprocess.run(
        [str(ql3_executable()), "zone-rules", "adopt", "--dsn", run.dsn("admin")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, time.monotonic() - started


def _new_york_expected(
    run: Scenario, ny: list[int], took_effect: int
) -> tuple[set[tuple[int, int]], int]:
    """Check New York's runs and skip records against cronsim; return the runs expected.

    Returns the (schedule, occurrence) pairs that must be runs and how many were skipped.
    """
    runs = {(sid, at) for sid, at in fetch(run.dsn(), RUNS_SQL) if sid in ny}
    skips = [row for row in fetch(run.dsn(), SKIPS_SQL) if row[0] in ny]
    expected: set[tuple[int, int]] = set()
    skipped = 0
    for schedule_id in ny:
        definition, first = run.schedules[schedule_id]
        end = definition.end_at_ms
        assert end is not None
        # Under 2000a New York is Tokyo: its occurrences up to the switch, by cronsim.
        old = [first, *occurrences_between(definition.cron, TOKYO, first, min(took_effect, end))]
        old = [at for at in old if at <= min(took_effect, end)]
        covered: set[int] = set()
        for _, low, high, count, reason, before, after in (s for s in skips if s[0] == schedule_id):
            assert (reason, before, after) == ("zone_rules_changed", MADE_UP, zone_rules_version())
            inside = [at for at in old if low <= at <= high]
            assert (inside[:1], inside[-1:], len(inside)) == ([low], [high], count), (low, high)
            assert not covered & set(inside), "two skip records cover one occurrence"
            covered |= set(inside)
            skipped += count
        admitted = {at for sid, at in runs if sid == schedule_id}
        assert not admitted & covered, "an occurrence is both a run and skipped"
        assert all(at <= took_effect for at in admitted), "a run decided after the switch"
        assert admitted | covered == set(old), "an old-rules occurrence has neither"
        # The real rules' occurrences after the switch inside the window (none: hours away).
        new = occurrences_between(definition.cron, NEW_YORK, took_effect, end)
        expected |= {(schedule_id, at) for at in (*sorted(set(old) - covered), *new)}
    return expected, skipped


def _raced_hand_backs(run: Scenario) -> int:
    """Assert no claim stands at the end; return how many raced claims replicas handed back."""
    standing = run.fetch_admin(STANDING_CLAIMS_SQL)
    assert standing == [], f"claims left standing (schedule, expiry, cursor): {standing}"
    return sum(
        int(record.get("released", 0))
        for replica in run.replicas
        for record in replica.events("claims.raced_released")
    )


def test_adopt_under_running_replicas_loses_nothing(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Every occurrence once under the rules in force when it fell due, or a zone skip record."""
    run = scenario("zone-switch", "3, 7")
    run.prepare()
    adopt_zone_rules(run.dsn("admin"), version=MADE_UP, data=_made_up_data())
    for _ in range(3):
        run.replica(lease_ms=LEASE_MS, claim_batch=2)
    run.wait_ready()
    cron = f"* * {_tokyo_hours(run.now_ms())} * * *"
    ny = run.add_schedules(
        SCHEDULES, window_s=WINDOW_S, cron=cron, timezone=NEW_YORK, engine_timezone=TOKYO,
        prefix="ny",
    )  # fmt: skip
    utc = run.add_schedules(SCHEDULES, window_s=WINDOW_S, prefix="utc")
    # A few seconds of New York admissions under the made-up rules, then the switch.
    wait_until(
        lambda: run.runs_count() >= 4 * SCHEDULES * 2,
        timeout_s=30,
        what="New York and UTC admissions under 2000a",
    )
    with ScheduleAdmin(run.dsn("admin")) as admin:
        names = {r.schedule_id: r.name for r in admin.list_schedules()}
        paused = [admin.pause(names[schedule_id]) for schedule_id in ny[:PAUSED]]
    since = max(p.updated_at_ms for p in paused)
    wait_until(lambda: run.now_ms() >= since + PAUSE_MS, timeout_s=30, what="the pause to pass")
    output, adopt_s = _adopt_with_the_cli(run)
    run.fault(
        f"`ql3 zone-rules adopt` ({MADE_UP} -> this node's tzdata, New York {TOKYO} -> real)"
        f" under 3 running replicas, {PAUSED} New York schedules paused {PAUSE_MS} ms before it"
    )
    switch = read_zone_rule_history(run.dsn("admin"))[-1]
    assert (switch.version, switch.superseded_at_ms) == (zone_rules_version(), None)
    took_effect = switch.took_effect_at_ms
    run.wait_exhausted(timeout_s=60)
    handed_back = _raced_hand_backs(run)
    expected, skipped = _new_york_expected(run, ny, took_effect)
    # Each paused schedule had at least the pause's occurrences due and undecided.
    assert skipped >= PAUSED * PAUSE_MS // 1_000, skipped
    utc_expected = run.expected_occurrences(utc)
    first_cursor = min(first for _, first in run.schedules.values())
    moved = [line for line in output.splitlines() if line.startswith("  ny")]
    run.note(
        f"cron {cron!r} in {NEW_YORK} (Tokyo's hours under {MADE_UP}) and '* * * * * *' in UTC;"
        f" adopt took effect {took_effect - first_cursor} ms after the first cursor, its CLI run"
        f" {adopt_s:.1f} s; {len(moved)} New York schedules moved, {skipped} occurrence(s) due"
        " under the old rules recorded as zone_rules_changed; UTC untouched;"
        f" {handed_back} raced claim(s) handed back by their replicas, none left standing"
    )
    run.evidence.verdict = (
        f"{len(expected)} New York runs + {skipped} zone skips = cronsim's {MADE_UP}"
        " occurrences up to the switch; 0 after it"
    )
    run.finish(expected=expected | utc_expected, bound=BOUND)
