"""The parts every chaos lateness bound is built from, and `Bound`, their sum with its arithmetic.

Each scenario states the latest an occurrence may be admitted under its fault as a sum of named
parts (the replicas' poll interval, the cycle slack measured by the baseline, the fault's own
cost), so docs/EVIDENCE.md prints the derivation beside the figure, not only a number.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- the parts every lateness bound is built from (each scenario adds its own fault's cost) ----
# `ql3 run --poll-interval-ms` of every replica: the longest idle sleep when the database gives
# no next-due hint (a replica told its zone rules differ, say). With a hint (claim expiries
# included) an idle replica wakes 1 ms after it, so the interval is not part of the slack; a
# scenario whose fault withholds the hint adds it as a part of its own.
POLL_INTERVAL_MS = 200
# Measured per-admission lateness of the no-fault baseline (3 replicas, 36 admissions a run),
# under the shared 2-core machine's parallel load (load average 5.3-6.4, three other engineers'
# suites running): p99 per run 24, 28, 35 and 104 ms; max of all 144 admissions 104 ms.
BASELINE_WORST_MS = 104
# A replica waking this late (named mutant `replica-wakes-300-ms-late`) must fail the baseline.
LATE_WAKE_MS = 300
# The slack: ~2.4x the worst sample, for bursts the samples missed, and below LATE_WAKE_MS so
# that a late wake cannot hide inside it.
CYCLE_SLACK_MS = 250
assert BASELINE_WORST_MS < CYCLE_SLACK_MS < LATE_WAKE_MS
SLACK = ("cycle slack", CYCLE_SLACK_MS)


@dataclass(frozen=True)
class Bound:
    """A lateness bound as the sum of named parts, so its arithmetic is printed beside it."""

    parts: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, *parts: tuple[str, int]) -> Bound:
        """Build from (what, ms) parts, e.g. Bound.of(("lease", 2_000), SLACK)."""
        return cls(tuple(parts))

    @property
    def ms(self) -> int:
        """The bound in milliseconds."""
        return sum(ms for _, ms in self.parts)

    def __str__(self) -> str:
        return f"{self.ms} = " + " + ".join(f"{what} {ms}" for what, ms in self.parts)
