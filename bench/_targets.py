"""Every target of the benchmark, in one place.

The parts write them into their JSON lines (so a line says what it was measured against) and the
report judges every figure with these values when it renders, so re-rendering an older run shows it
against the targets of today. What each figure is and how it is measured: bench/method.md.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BURST_DRAIN_S",
    "BURST_REPLICAS",
    "CLAIM_RATIO",
    "LATENESS_P99_MS",
    "LATENESS_REPLICAS",
    "REPLICA_RSS_MB",
    "RN_VS_R1",
    "VERIFY_RSS_MB",
    "VERIFY_RUNS",
    "VERIFY_S",
    "VS_BASELINE",
    "WORKER",
]

# Catch-up and burst throughput, QL3 / the equal-work bare-SQL baseline at the same R (1, 2, 4).
VS_BASELINE: Final = 0.9
# QL3 at R = 2 and R = 4 / QL3 at R = 1, the same work: more replicas are never slower.
RN_VS_R1: Final = 1.0
# Admission lateness p99 at R = 2 by schedule count, the worst of the passes.
LATENESS_P99_MS: Final = {100: 10, 1000: 50}
LATENESS_REPLICAS: Final = 2
# 100 000 occurrences due at one instant: every one admitted within this, at R = 4.
BURST_DRAIN_S: Final = 5.0
BURST_REPLICAS: Final = 4
# Claim latency (p50) with the most schedules measured / with 1 000.
CLAIM_RATIO: Final = 1.5
# One replica's resident set after ten minutes with 100 000 schedules due every minute.
REPLICA_RSS_MB: Final = 80.0
# `ql3 verify` of ten million Runs: duration and peak resident set of the verifying process.
VERIFY_RUNS: Final = 10_000_000
VERIFY_S: Final = 60.0
VERIFY_RSS_MB: Final = 100.0
# Execution: no-op tasks/s of 4 workers / a bare SKIP LOCKED take-finish loop doing the same
# writes; admission -> attempt start p99 with idle workers; 1 000 `true` commands at one instant
# on 2 workers, the last one finished; a worker's resident set after ten minutes.
WORKER: Final = {
    "throughput_ratio": 0.8,
    "start_p99_ms": 20.0,
    "burst_last_finished_s": 1.0,
    "rss_mb": 80.0,
}
