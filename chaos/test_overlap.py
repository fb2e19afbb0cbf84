"""The overlap policy `skip` under a SIGKILLed worker (DESIGN §10): never two Runs at once.

One `ql3 run` replica admits an every-second schedule whose command lasts 3 s (`sleep 3`), with
overlap `skip` and its default cap of one live Run; three real `ql3 worker` processes race to take
its Runs. While a Run executes, each Run due beside it is skipped by the take (attempt `skipped`,
a skip record of reason overlap). The worker executing one of them is SIGKILLed: its attempt stays
live (running in the database; its command may still run, only its worker would kill its group)
until its lease expires by the database clock and another worker abandons it, so every Run due
meanwhile is skipped too. Asserted from the database: no two attempts of the schedule ever
executed at once ([started_at_ms, finished_at_ms), database times); every skipped Run has its
overlap skip record and every record its never-started Run; every expected occurrence is one Run
(executed or skipped), exactly once; `ql3 verify` and the test kit's oracle find it clean.
"""

from __future__ import annotations

import itertools
import signal
from typing import TYPE_CHECKING

from harness import SLACK, Bound, wait_until
from ql3_runtime_core import OverlapPolicy, TaskExecution
from worker_scenarios import REPLICA_LEASE_MS, SETTLE_S, WORKER_LEASE_MS, running_since
from workers import WORKER_POLL_MS, Workers, attempts, wait_settled

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

WINDOW_S = 8
COMMAND_MS = 3_000
# Overlap records against their Runs, read back as the admin.
RECORDS_SQL = (
    "SELECT k.schedule_id, k.first_skipped_ms, k.last_skipped_ms, k.skipped_count"
    " FROM ql3.skipped_occurrences AS k WHERE k.reason = 'overlap' ORDER BY k.first_skipped_ms"
)
RUNS_SQL = "SELECT id, scheduled_for_ms FROM ql3.runs WHERE kind = 'cron' ORDER BY id"


def test_skip_never_runs_two_at_once_when_a_worker_dies_mid_run(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """3 workers, `sleep 3` every second under skip, one worker SIGKILLed mid-run."""
    run = scenario("worker-overlap-skip", "8")
    run.prepare()
    run.replica(lease_ms=REPLICA_LEASE_MS)
    workers = Workers(run)
    for _ in range(3):
        workers.start(lease_ms=WORKER_LEASE_MS)
    run.wait_ready()
    execution = TaskExecution(
        command=f"sleep {COMMAND_MS // 1000}", max_attempts=1, overlap=OverlapPolicy.SKIP
    )
    (schedule_id,) = run.add_schedules(1, window_s=WINDOW_S, execution=execution)

    # The fault: kill the worker of a Run that has been executing for 300 ms.
    wait_until(lambda: bool(running_since(run, 300)), timeout_s=30, what="a Run executing 300 ms")
    victim_attempt, holder = running_since(run, 300)[0]
    victim = next(w for w in workers.started if w.worker_id == holder)
    assert victim.kill() == -signal.SIGKILL, victim.tail()
    run.fault(f"SIGKILL worker {holder} while attempt {victim_attempt} ran `sleep 3`")

    run.wait_exhausted(timeout_s=WINDOW_S + 30)
    wait_settled(run, workers, timeout_s=SETTLE_S)
    workers.stop_all()
    # The admission bound of every worker scenario: the replica is never faulted.
    run.finish(bound=Bound.of(SLACK), executed=True)

    every = [a for a in attempts(run) if a["schedule_id"] == schedule_id]
    by_id = {a["id"]: a for a in every}
    # The fault happened: the killed worker's attempt was running and ended abandoned.
    killed = by_id[victim_attempt]
    assert (killed["state"], killed["worker_id"]) == ("abandoned", holder), killed

    # Never two at once: sorted by start, each executed attempt starts at or after the previous
    # one's end (half-open spans; the abandoned one counts until it was abandoned).
    executed = sorted(
        (a for a in every if a["started_at_ms"] is not None), key=lambda a: a["started_at_ms"]
    )
    for before, after in itertools.pairwise(executed):
        assert after["started_at_ms"] >= before["finished_at_ms"], (before, after)

    # Every skip recorded, every record a skipped Run that never executed; each occurrence once.
    skipped_runs = {a["run_id"] for a in every if a["state"] == "skipped"}
    assert all(by_id[i]["started_at_ms"] is None for i in by_id if by_id[i]["state"] == "skipped")
    occurrence = {int(r[0]): int(r[1]) for r in run.fetch_admin(RUNS_SQL)}
    records = run.fetch_admin(RECORDS_SQL)
    assert all(r[0] == schedule_id and r[1] == r[2] and r[3] == 1 for r in records), records
    recorded = sorted(int(r[1]) for r in records)
    assert recorded == sorted(occurrence[i] for i in skipped_runs)
    assert len(set(recorded)) == len(recorded)
    assert {a["state"] for a in every} <= {"succeeded", "skipped", "abandoned"}
    assert len({a["run_id"] for a in every}) == len(occurrence) == len(every)
    assert skipped_runs, "no Run was skipped: the policy was never exercised"

    # The slot the killed worker held: live until abandoned, by the database clock.
    abandoned_after = run.fetch_admin(
        "SELECT created_at_ms - (payload->>'lease_expired_at_ms')::bigint FROM ql3.events"
        " WHERE kind = 'attempt.abandoned' AND attempt_id = %s",
        (victim_attempt,),
    )[0][0]
    # Any live worker abandons an expired lease on its next poll; the slack covers the machine.
    abandon_bound = Bound.of(("worker poll", WORKER_POLL_MS), SLACK)
    assert 0 <= abandoned_after <= abandon_bound.ms, (abandoned_after, str(abandon_bound))
    during = [
        a
        for a in every
        if a["state"] == "skipped"
        and killed["started_at_ms"] <= a["finished_at_ms"] < killed["finished_at_ms"]
    ]
    run.note(
        f"{len(executed)} Runs executed one at a time, {len(skipped_runs)} skipped for overlap"
        f" (each with its record), of {len(occurrence)} occurrences; the killed worker's attempt"
        f" held the slot until abandoned {abandoned_after} ms after its lease ({WORKER_LEASE_MS}"
        f" ms) expired (bound {abandon_bound}), {len(during)} Run(s) skipped meanwhile"
    )
    run.evidence.verdict = (
        f"{len(executed)} executed, {len(skipped_runs)} skipped for overlap, never two at once"
    )
