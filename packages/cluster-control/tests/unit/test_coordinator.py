"""Coordinator cycles against the in-memory fake repository (no database, no clock)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from fake_repository import FakeRepository
from ql3_cluster_control import Coordinator, CoordinatorMetrics, CycleOverlapError, CycleResult
from ql3_runtime_core import AdmittedRun, CommitStatus, RepositoryUnavailableError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from uuid import UUID

    from ql3_runtime_core import ClusterScheduleClaim


def _coordinator(repo: FakeRepository, **kwargs: object) -> Coordinator:
    return Coordinator(repo, owner_id="replica-a", lease_ms=5_000, **kwargs)  # type: ignore[arg-type]


def _after_a_failed_commit() -> tuple[FakeRepository, Coordinator]:
    """Run one cycle whose commit fails on a due schedule: its claim is left held."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)
    repo.fail_next_commit = RepositoryUnavailableError("fake: connection lost")
    coordinator = _coordinator(repo)
    with pytest.raises(RepositoryUnavailableError):
        coordinator.run_cycle()
    return repo, coordinator


def test_claim_rounds_preserve_each_claims_database_time() -> None:
    """Claim rounds of one cycle keep their own DB times; the summary shows first and last."""
    repo = FakeRepository(tick_ms=7)
    for _ in range(5):
        repo.add(first_due_ms=repo.now_ms)
    result = _coordinator(repo, claim_batch=2).run_cycle()
    acquired = sorted({run.created_at_ms for run in result.admitted})
    assert result.summary.claims == 5
    assert result.summary.admitted == 5
    assert repo.calls.count("claim") == 4  # 2 + 2 + 1, then an empty round
    first, last = (
        result.summary.first_claim_acquired_at_ms,
        result.summary.last_claim_acquired_at_ms,
    )
    assert first is not None
    assert last is not None
    # Three rounds, each a claim and a commit statement observing the fake database clock.
    assert last - first == 28
    assert all(created > first for created in acquired)


def test_empty_cycle_summary_has_no_times() -> None:
    """A cycle that claimed nothing reports null acquired times and no work remaining."""
    repo = FakeRepository()
    repo.add()
    result = _coordinator(repo).run_cycle()
    assert result.summary.claims == 0
    assert result.summary.first_claim_acquired_at_ms is None
    assert result.summary.last_claim_acquired_at_ms is None
    assert not result.work_remaining


def test_budget_limits_a_cycle_and_leaves_work_for_the_next() -> None:
    """The cycle budget caps admissions; the backlog is admitted by the next cycle."""
    repo = FakeRepository()
    for _ in range(3):
        row = repo.add(first_due_ms=repo.now_ms - 10_000)
        row.definition = row.definition.model_copy(update={"misfire_policy": "catch_up"})
    coordinator = _coordinator(repo, cycle_budget=4, claim_batch=16)
    first = coordinator.run_cycle()
    assert first.summary.admitted == 4
    assert first.work_remaining
    second = coordinator.run_cycle()
    assert second.summary.admitted > 0
    keys = [(run.schedule_id, run.scheduled_for_ms) for run in repo.runs]
    assert len(keys) == len(set(keys))


def test_callback_and_notifications_only_for_fenced_admissions() -> None:
    """Raced claims allocate no run, notify nobody and never reach the admission callback."""
    repo = FakeRepository()
    for _ in range(3):
        repo.add(first_due_ms=repo.now_ms)
    seen: list[AdmittedRun] = []

    def expire_one(fake: FakeRepository) -> None:
        # Another replica took schedule 2 over after its claim expired.
        row = fake.schedules[2]
        row.version += 1
        row.claim_owner_id, row.claim_token = "replica-b", uuid4()
        row.claim_expires_at_ms = fake.now_ms + 5_000

    repo.before_commit = expire_one
    result = _coordinator(repo, on_admitted=seen.append).run_cycle()
    assert result.summary.raced == 1
    assert result.summary.committed == 2
    assert sorted(run.schedule_id for run in seen) == [1, 3]
    assert [run.run_id for run in seen] == repo.notifications
    assert {run.schedule_id for run in repo.runs} == {1, 3}
    # The other replica's claim is not this one's to hand back.
    assert repo.schedules[2].claim_owner_id == "replica-b"


def test_a_commit_raced_by_an_admin_change_hands_its_claim_back() -> None:
    """An admin change under a held claim races its commit; the claim is released at once.

    The change bumps the row's version and leaves the claim columns (DESIGN §5), so the commit
    writes nothing. Handed back (`same_grant`), the row is claimable again: the cycle's next round
    claims it as it now is and admits its occurrence, and no claim is left on any row. Control:
    the other test's takeover (another replica's claim on the row) is never released.
    """
    repo = FakeRepository()
    for _ in range(3):
        repo.add(first_due_ms=repo.now_ms)

    def admin_change(fake: FakeRepository) -> None:
        fake.schedules[2].version += 1

    repo.before_commit = admin_change
    coordinator = _coordinator(repo)
    result = coordinator.run_cycle()
    assert result.summary.raced == 1
    assert repo.calls.count("release") == 1
    assert sorted(run.schedule_id for run in repo.runs) == [1, 2, 3]
    assert [row.claim_token for row in repo.schedules.values()] == [None, None, None]
    assert coordinator.held_claims == ()


def test_a_failed_release_of_raced_claims_is_retried_by_the_next_cycle() -> None:
    """The raced claims stay held when their release fails; the next cycle releases them first."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)
    real_release = repo.release_claims
    failures = [RepositoryUnavailableError("fake: connection lost")]

    def release_once_failing(claims: Sequence[ClusterScheduleClaim]) -> int:
        if failures:
            raise failures.pop()
        return real_release(claims)

    repo.release_claims = release_once_failing  # type: ignore[method-assign]
    repo.before_commit = lambda fake: setattr(fake.schedules[1], "version", 99)
    coordinator = _coordinator(repo)
    with pytest.raises(RepositoryUnavailableError):
        coordinator.run_cycle()
    (held,) = coordinator.held_claims
    assert repo.schedules[1].claim_token == held.claim_token
    result = coordinator.run_cycle()
    assert result.summary.admitted == 1
    assert repo.schedules[1].claim_token is None
    assert coordinator.held_claims == ()


def test_lost_commit_reply_is_settled_once_without_readmission() -> None:
    """An UNCERTAIN commit is resolved from facts: one run per occurrence, callback once."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)
    repo.lose_next_reply = True
    repo.resolve_failures = 2  # the database is briefly unreachable while settling
    seen: list[AdmittedRun] = []
    metrics = CoordinatorMetrics()
    result = _coordinator(repo, on_admitted=seen.append, metrics=metrics).run_cycle()
    assert len(repo.runs) == 1
    assert len(seen) == 1
    assert result.summary.uncertain == 1
    assert result.summary.committed == 1
    assert repo.calls.count("resolve") == 3
    assert repo.schedules[1].claim_token is None
    value = metrics.registry.get_sample_value(
        "ql3_uncertain_resolved_total", {"outcome": CommitStatus.COMMITTED.value}
    )
    assert value == 1


def test_clock_regression_abandons_the_cycle_and_leaves_claims_to_expire() -> None:
    """A database clock step back is counted, nothing written, the claims left to expire."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)

    def step_back(fake: FakeRepository) -> None:
        fake.now_ms -= 60_000

    repo.before_commit = step_back
    metrics = CoordinatorMetrics()
    coordinator = _coordinator(repo, metrics=metrics)
    result = coordinator.run_cycle()
    assert result.abandoned
    assert result.summary.clock_regressed == 1
    assert repo.runs == []
    assert repo.schedules[1].claim_token is not None
    assert coordinator.held_claims == ()
    assert metrics.registry.get_sample_value("ql3_clock_regressions_total") == 1


def test_fault_keeps_claims_held_and_next_cycle_releases_them_first() -> None:
    """A commit fault propagates; the next cycle hands the stale claims back before claiming."""
    repo, coordinator = _after_a_failed_commit()
    assert len(coordinator.held_claims) == 1
    result = coordinator.run_cycle()
    held_after: tuple[object, ...] = coordinator.held_claims
    assert repo.calls[-4:-2] == ["release", "claim"]
    assert result.summary.admitted == 1
    assert held_after == ()


def test_cycles_never_overlap() -> None:
    """A second cycle started while one runs is refused."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)
    entered, release = threading.Event(), threading.Event()
    coordinator = _coordinator(repo)
    errors: list[BaseException] = []

    def block(_fake: FakeRepository) -> None:
        entered.set()
        release.wait(10)

    repo.before_commit = block
    worker = threading.Thread(target=coordinator.run_cycle)
    worker.start()
    entered.wait(10)
    try:
        coordinator.run_cycle()
    except CycleOverlapError as exc:
        errors.append(exc)
    finally:
        release.set()
        worker.join(10)
    assert len(errors) == 1


def test_stop_request_prevents_new_claim_rounds() -> None:
    """Once a stop is requested, a cycle claims nothing more."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms)
    stop = threading.Event()
    stop.set()
    result = _coordinator(repo, stop_requested=stop).run_cycle()
    assert result.summary.claims == 0
    assert "claim" not in repo.calls


def test_release_held_claims_on_graceful_stop() -> None:
    """Held claims are released exactly so another replica can claim them at once."""
    repo, coordinator = _after_a_failed_commit()
    assert coordinator.release_held_claims() == 1
    assert repo.schedules[1].claim_token is None


def _catch_up_schedules(repo: FakeRepository, count: int, backlog_ms: int) -> None:
    for _ in range(count):
        row = repo.add(first_due_ms=repo.now_ms - backlog_ms)
        row.definition = row.definition.model_copy(update={"misfire_policy": "catch_up"})


def test_backlogs_shrink_the_claim_round_to_what_the_budget_serves() -> None:
    """After a round whose first claims spent the budget, rounds claim only what they serve."""
    repo = FakeRepository()
    # Every schedule is 10 minutes behind; catch_up admits the last minute's (grace) 60 each.
    _catch_up_schedules(repo, 6, 600_000)
    coordinator = _coordinator(repo, cycle_budget=4, claim_batch=6)
    first = coordinator.run_cycle()
    assert first.summary.claims == 4  # min(batch, budget): one served, three starved
    assert first.summary.admitted == 4
    second = coordinator.run_cycle()
    assert second.summary.claims == 1  # only as many as the last round could serve
    assert second.summary.admitted == 4


def test_a_round_with_budget_left_restores_the_full_batch() -> None:
    """Once backlogs no longer spend the budget, the next round claims the whole batch again."""
    repo = FakeRepository()
    _catch_up_schedules(repo, 6, 600_000)
    coordinator = _coordinator(repo, cycle_budget=4, claim_batch=6)
    coordinator.run_cycle()  # starves three claims: the round size drops to 1
    for row in repo.schedules.values():
        # The backlogs are gone: one occurrence (the last whole second) due on each.
        row.next_due_at_ms = repo.now_ms // 1000 * 1000
    result = coordinator.run_cycle()
    # One claim (round size 1) admits 1 and leaves budget: the next round claims min(6, 3).
    assert [len(r) for r in _claim_rounds(result)] == [1, 3]


def _claim_rounds(result: CycleResult) -> list[list[int]]:
    """Group a cycle's admitted runs by their claim token (one token per claim round)."""
    rounds: dict[UUID, list[int]] = {}
    for run in result.admitted:
        rounds.setdefault(run.claim_token, []).append(run.schedule_id)
    return list(rounds.values())
