"""Independent runtime repositories racing on the same schedules (DESIGN §14), as ql3_runtime.

Each writer has its own connection and claims, decides and commits in a loop; every fifth granted
claim round it abandons its claims as if it crashed, so others must wait for database-time expiry.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest
from ql3_cluster_postgres import PostgresScheduleRepository, verify_history
from ql3_runtime_core import ClusterScheduleClaim, CommitStatus
from repo_helpers import command, decide, fetch, make_schedules

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

SCHEDULES = 12
ROUNDS = 200
LEASE_MS = 1000


@dataclass
class _Log:
    """What one writer saw: its claims, commit times (None if abandoned), 40001 retries."""

    claims: list[ClusterScheduleClaim] = field(default_factory=list)
    ended_at: dict[tuple[int, int], int | None] = field(default_factory=dict)
    commits: int = 0
    retries: int = 0
    errors: list[BaseException] = field(default_factory=list)


def _writer(dsn: str, owner: str, log: _Log, start: threading.Barrier) -> None:
    with PostgresScheduleRepository(dsn) as repo:
        start.wait()
        granted = 0
        for _ in range(ROUNDS):
            claims = repo.claim_due_schedules(command(owner, lease_ms=LEASE_MS), 4)
            log.claims.extend(claims)
            granted += bool(claims)
            # The first granted round is abandoned (then every fifth): early enough that its
            # lease (1 s) expires while the others still race for ~3 s, so takeovers happen.
            if claims and granted % 5 == 1:
                for claim in claims:
                    log.ended_at[(claim.schedule_id, claim.version)] = None
            elif claims:
                batch = repo.commit_decisions([decide(claim) for claim in claims])
                log.commits += 1
                log.retries += batch.serialization_retries
                for claim, outcome in zip(claims, batch.outcomes, strict=True):
                    done = None
                    if outcome.status is CommitStatus.COMMITTED:
                        done = outcome.committed_at_ms
                    log.ended_at[(claim.schedule_id, claim.version)] = done
            time.sleep(0.02)  # pacing only (monotonic); correctness is checked in the database


@pytest.mark.parametrize("writers", [2, 4])
def test_racing_repositories_admit_each_occurrence_exactly_once(
    ql3_db: Ql3Database, writers: int
) -> None:
    """N writers, many rounds: one run per occurrence, takeover only after expiry, ~no 40001."""
    ids = make_schedules(ql3_db, SCHEDULES, shift_back_ms=2000)
    dsn = ql3_db.dsn("runtime")
    initial = dict(fetch(dsn, "SELECT id, next_due_at_ms FROM ql3.trigger_schedules"))
    logs = [_Log() for _ in range(writers)]
    start = threading.Barrier(writers)

    def run(index: int) -> None:
        try:
            _writer(dsn, f"writer-{index}", logs[index], start)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread below
            logs[index].errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert [error for log in logs for error in log.errors] == []

    final = dict(fetch(dsn, "SELECT id, next_due_at_ms FROM ql3.trigger_schedules"))
    runs: dict[int, list[int]] = {sid: [] for sid in ids}
    for sid, scheduled_for in fetch(
        dsn, "SELECT schedule_id, scheduled_for_ms FROM ql3.runs ORDER BY scheduled_for_ms"
    ):
        runs[sid].append(scheduled_for)
    for sid in ids:
        assert runs[sid] == list(range(initial[sid], final[sid], 1000)), sid
    assert sum(len(r) for r in runs.values()) > SCHEDULES * 3

    claims = sorted(
        (claim for log in logs for claim in log.claims),
        key=lambda claim: (claim.schedule_id, claim.version),
    )
    ended = {key: value for log in logs for key, value in log.ended_at.items()}
    takeovers = 0
    for before, after in itertools.pairwise(claims):
        if before.schedule_id != after.schedule_id:
            continue
        committed_at = ended.get((before.schedule_id, before.version))
        if committed_at is None:
            takeovers += 1
            assert after.claim_acquired_at_ms >= before.claim_expires_at_ms, (before, after)
        else:
            assert after.claim_acquired_at_ms >= committed_at
    assert takeovers > 0

    report = verify_history(ql3_db.dsn("admin"))
    assert report.ok, report.violations

    commits = sum(log.commits for log in logs)
    retries = sum(log.retries for log in logs)
    assert retries <= max(2, commits // 20), (retries, commits)
