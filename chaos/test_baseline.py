"""No-fault baseline: three replicas, three every-second schedules, the checks of every fault.

It is also where the cycle slack (harness.CYCLE_SLACK_MS) is measured and judged: every
admission's lateness is recorded as a distribution, and the bound is the slack alone, which is
below what a replica waking 300 ms late would show (the named mutant `replica-wakes-300-ms-late`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from harness import SLACK, Bound

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

WINDOW_S = 12
LEASE_MS = 2_000
# No fault: nothing is ever orphaned, so the lease never enters; a due occurrence waits only for
# a replica's wake-up (1 ms after the database's next-due hint), its round trips and the
# machine's scheduling noise: the cycle slack alone.
BOUND = Bound.of(SLACK)
LATENESS_SQL = "SELECT created_at_ms - scheduled_for_ms AS lateness_ms FROM ql3.runs ORDER BY 1"


def _percentile(ordered: list[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(ordered) * int(fraction * 100) // 100))
    return ordered[min(rank, len(ordered)) - 1]


def test_baseline_admits_every_occurrence_once(scenario: Callable[[str, str], Scenario]) -> None:
    """Without faults every occurrence is admitted exactly once, on time, 1:1:2, no claim left."""
    run = scenario("baseline", "4, 7")
    run.prepare()
    for _ in range(3):
        run.replica(lease_ms=LEASE_MS)
    run.wait_ready()
    run.add_schedules(3, window_s=WINDOW_S)
    run.wait_exhausted(timeout_s=WINDOW_S + 20)
    outcome = run.finish(bound=BOUND)
    # Every whole second of the window is an occurrence, less the one the creation fell into.
    assert outcome.expected >= 3 * (WINDOW_S - 1)
    lateness = [int(row[0]) for row in run.fetch_admin(LATENESS_SQL)]
    assert len(lateness) == outcome.admitted
    load = os.getloadavg()[0]
    run.note(
        f"lateness of {len(lateness)} admissions: p50 {_percentile(lateness, 0.5)} ms,"
        f" p99 {_percentile(lateness, 0.99)} ms, max {lateness[-1]} ms (load average {load:.1f})"
    )
