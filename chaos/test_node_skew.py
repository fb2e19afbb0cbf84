"""Node clock skew: replicas at +1 h, -1 h and +5 s (libfaketime) racing normal ones.

The skewed replicas run `ql3 run` with libfaketime preloaded (`FAKETIME`, and
`FAKETIME_DONT_FAKE_MONOTONIC=1` so that sleeping stays sane). Because no decision reads a node
clock (rule zero), their history must be indistinguishable from the normal replicas': every
occurrence exactly once, none early, none late beyond the usual bound.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from harness import SLACK, Bound
from ql3_testkit import find_faketime_library

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 2_000
SKEWS = {"+1h": 3_600, "-1h": -3_600, "+5s": 5}
# `date +%s` has whole-second resolution and the two reads run milliseconds apart, so a skew
# that took effect shows within 1 s (a tolerance of 5 s would accept an unskewed +5s node).
TOLERANCE_S = 1
# A node clock decides nothing, so the skewed replicas owe exactly the baseline's bound.
BOUND = Bound.of(SLACK)


def _faketime_env(skew: str) -> dict[str, str]:
    return {
        "LD_PRELOAD": str(find_faketime_library()),
        "FAKETIME": skew,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def _node_clock_s(env: dict[str, str] | None) -> int:
    """Read a node clock through `date` (only to prove the fault took effect, never to decide)."""
    full = dict(os.environ) | (env or {})
    result = subprocess.run(["date", "+%s"], env=full, capture_output=True, text=True, check=True)
    return int(result.stdout.strip())


def test_skewed_replicas_make_identical_history(scenario: Callable[[str, str], Scenario]) -> None:
    """Replicas whose node clocks are off by +1 h, -1 h and +5 s admit exactly like the others."""
    run = scenario("node-clock-skew", "3, 7")
    run.prepare()
    for skew, seconds in SKEWS.items():
        difference = _node_clock_s(_faketime_env(skew)) - _node_clock_s(None)
        assert abs(difference - seconds) <= TOLERANCE_S, (
            f"libfaketime did not skew the node clock by {skew}: difference {difference} s"
        )
    skewed = [
        run.replica(lease_ms=LEASE_MS, claim_batch=1, env_extra=_faketime_env(skew))
        for skew in SKEWS
    ]
    for _ in range(2):
        run.replica(lease_ms=LEASE_MS, claim_batch=1)
    run.fault("node clocks of 3 replicas skewed +1 h, -1 h, +5 s (LD_PRELOAD libfaketime)")
    run.wait_ready()
    run.add_schedules(6, window_s=14)
    run.wait_exhausted(timeout_s=35)
    by_replica = {r.owner_id: r.admitted() for r in run.replicas}
    run.note("admitted per replica: " + ", ".join(f"{k}={v}" for k, v in by_replica.items()))
    idle = [r.owner_id for r in skewed if not r.events("cycle.summary")]
    assert not idle, f"skewed replicas never completed a cycle: {idle}"
    assert sum(r.admitted() for r in skewed) > 0, "the skewed replicas admitted nothing"
    run.finish(bound=BOUND)
