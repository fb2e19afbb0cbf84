"""What the worker scenarios (test_workers*.py) share: leases, window, start-up and conclusion.

Each scenario starts one `ql3 run` replica and real `ql3 worker` processes (chaos/workers.py),
and ends the same way: wait for the window's end and every run's end, stop everything, and judge
the attempts from the database (`judge_execution`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness import SLACK, Bound
from workers import Workers, judge_execution, wait_settled

if TYPE_CHECKING:
    from collections.abc import Iterable

    from harness import Scenario
    from workers import ExecutionVerdict

__all__ = [
    "BOUND",
    "REPLICA_LEASE_MS",
    "SETTLE_S",
    "WINDOW_S",
    "WORKER_LEASE_MS",
    "conclude",
    "running_since",
    "start_with_workers",
]

REPLICA_LEASE_MS = 2_000
# The shortest lease a worker accepts (its kill margin + 2 s).
WORKER_LEASE_MS = 5_000
WINDOW_S = 6
# Where only workers are faulted (the replica never is), a due occurrence waits only for a cycle
# slack, as in the baseline (the workers' commands share the machine's 2 cores).
BOUND = Bound.of(SLACK)
# A run's commands last at most a few seconds; 60 s only stops a hung run.
SETTLE_S = 60


def start_with_workers(
    run: Scenario, workers: int, *, durable: bool = False, replica_env: dict[str, str] | None = None
) -> Workers:
    """Prepare the database, one connected `ql3 run` replica and `workers` connected workers."""
    run.prepare(durable=durable)
    run.replica(lease_ms=REPLICA_LEASE_MS, env_extra=replica_env or {})
    group = Workers(run)
    for _ in range(workers):
        group.start(lease_ms=WORKER_LEASE_MS)
    run.wait_ready()
    return group


def conclude(
    run: Scenario,
    workers: Workers,
    *,
    bound: Bound | None = BOUND,
    exhausting: Iterable[int] = (),
    window_s: float = WINDOW_S,
) -> ExecutionVerdict:
    """Wait for the window's end and every run's end; stop everything; judge from the database."""
    run.wait_exhausted(timeout_s=window_s + 30)
    wait_settled(run, workers, timeout_s=SETTLE_S)
    workers.stop_all()
    run.finish(bound=bound, executed=True)
    verdict = judge_execution(run, exhausting=exhausting)
    run.evidence.verdict = f"{verdict.succeeded_once} runs succeeded once" + (
        f", {verdict.exhausted} exhausted" if verdict.exhausted else ""
    )
    return verdict


def running_since(run: Scenario, ms: int) -> list[tuple[int, str]]:
    """Return the running attempts (id, holder) taken at least `ms` ago by the database clock."""
    rows = run.fetch_admin(
        "SELECT id, worker_id FROM ql3.attempts WHERE state = 'running' AND started_at_ms <="
        " floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - %s ORDER BY id",
        (ms,),
    )
    return [(int(row[0]), str(row[1])) for row in rows]
