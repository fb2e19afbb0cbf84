"""No-fault baseline: three replicas, three every-second schedules, the checks of every fault."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import SLACK, Bound

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

WINDOW_S = 12
LEASE_MS = 2_000
# No fault: nothing is ever orphaned, so the lease never enters; a due occurrence waits only for
# a replica's (capped) sleep, its round trips and the machine's scheduling noise.
BOUND = Bound.of(SLACK)


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
