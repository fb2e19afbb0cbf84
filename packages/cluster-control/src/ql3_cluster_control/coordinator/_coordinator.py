"""One Coordinator cycle (DESIGN §13, §4, §5): claim rounds, decide, commit, summarize.

The Coordinator talks to storage only through `ql3_runtime_core.ScheduleRepository`, so a cycle
is the same against PostgreSQL and against an in-memory fake. Every time it handles is a database
time carried by a claim or an outcome; the node's monotonic clock only measures the cycle's
duration (rule zero). Cycles never overlap: a second concurrent `run_cycle` is refused.

One schedule never stops the others (DESIGN §8): a row the claim could not read comes back
quarantined, and an exception from one claim's decision or commit normalization quarantines that
schedule with its reason; both are logged as a WARNING and counted, and the round goes on.

Decisions are computed with the zone rules each claim round carries: the recorded ones, loaded
from the database by the repository (never this node's tzdata), and each commit names their
version so that a decision made under rules an adopt replaced meanwhile is never written.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING

from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    ClockRegressionError,
    CommitStatus,
    log_event,
    summarize_cycle,
)

from ql3_cluster_control._backoff import Backoff
from ql3_cluster_control._config import CLAIM_BATCH_DEFAULT, CYCLE_BUDGET_DEFAULT
from ql3_cluster_control._tracing import add_attributes, span

from ._cycle import (
    CycleOverlapError,
    CycleResult,
    CycleState,
    decide_claims,
    next_round_size,
)
from ._uncertain import settle_uncertain

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import (
        AdmittedRun,
        ClaimCommit,
        ClusterScheduleClaim,
        CommitOutcome,
        CycleSummary,
        QuarantinedSchedule,
        ScheduleRepository,
        ZoneRules,
    )

    from ql3_cluster_control._metrics import CoordinatorMetrics

    from ._cycle import AdmissionCallback

__all__ = ["Coordinator"]

logger = logging.getLogger(__name__)


class Coordinator:
    """Runs cycles for one owner id against one repository.

    Args:
        repository: where claims come from and decisions go.
        owner_id: this replica's identity, written into every claim and run.
        lease_ms: claim lease (1 000..60 000, decided by the database clock).
        claim_batch: at most this many schedules per claim round.
        cycle_budget: at most this many occurrences admitted per cycle.
        on_admitted: called once per admission that passed the fence, after its commit.
        metrics: counters to update, if any.
        backoff: delays between attempts to settle an uncertain commit.
        stop_requested: when set, no new claim round starts and uncertain settling gives up.

    """

    def __init__(
        self,
        repository: ScheduleRepository,
        *,
        owner_id: str,
        lease_ms: int = 30_000,
        claim_batch: int = CLAIM_BATCH_DEFAULT,
        cycle_budget: int = CYCLE_BUDGET_DEFAULT,
        on_admitted: AdmissionCallback | None = None,
        metrics: CoordinatorMetrics | None = None,
        backoff: Backoff | None = None,
        stop_requested: threading.Event | None = None,
    ) -> None:
        self.repository = repository
        self.owner_id = owner_id
        self.lease_ms = lease_ms
        self.claim_batch = claim_batch
        self.cycle_budget = cycle_budget
        self.on_admitted = on_admitted
        self.metrics = metrics
        self.backoff = backoff or Backoff(initial_s=0.05, maximum_s=2.0)
        self.stop_requested = stop_requested or threading.Event()
        self._cycle_lock = threading.Lock()
        self._held: list[ClusterScheduleClaim] = []
        # Claims the next round asks for (see `next_round_size`); kept across cycles.
        self._round_size = claim_batch

    @property
    def held_claims(self) -> tuple[ClusterScheduleClaim, ...]:
        """Claims granted to this Coordinator and not yet committed or released."""
        return tuple(self._held)

    def _set_held(self, claims: Sequence[ClusterScheduleClaim]) -> None:
        self._held = list(claims)
        if self.metrics is not None:
            self.metrics.claims_held.set(len(self._held))

    def adopt_claims(self, claims: Sequence[ClusterScheduleClaim]) -> None:
        """Take over claims a previous Coordinator of this replica still held (after a fault).

        The next cycle releases them first (exact match), so nothing waits for their lease.
        """
        self._set_held([*self._held, *claims])

    def release_held_claims(self) -> int:
        """Release the claims still held (exact match, database time); returns how many."""
        if not self._held:
            return 0
        released = self.repository.release_claims(self._held)
        log_event(logger, logging.INFO, "claims.released", released=released, held=len(self._held))
        self._set_held([])
        return released

    def run_cycle(self) -> CycleResult:
        """Run one cycle; database faults propagate (the service backs off and retries).

        Raises:
            CycleOverlapError: another cycle of this Coordinator is running.

        """
        if not self._cycle_lock.acquire(blocking=False):
            raise CycleOverlapError(f"owner {self.owner_id}: a cycle is already running")
        try:
            with span("ql3.cycle", owner_id=self.owner_id):
                return self._cycle()
        finally:
            self._cycle_lock.release()

    def _cycle(self) -> CycleResult:
        started = time.monotonic()
        # Claims left by a failed cycle still stand until they expire; hand them back first
        # so this replica (or another) can take them at once.
        self.release_held_claims()
        state = CycleState(remaining=self.cycle_budget)
        abandoned = False
        try:
            while state.remaining > 0 and not self.stop_requested.is_set():
                if not self._round(state):
                    break
        except ClockRegressionError as exc:
            abandoned = True
            state.clock_regressed += 1
            self._abandon(exc)
        duration = time.monotonic() - started
        summary = summarize_cycle(
            self.owner_id,
            state.claims,
            state.outcomes,
            uncertain=state.uncertain,
            clock_regressed=state.clock_regressed,
            skipped=state.skipped,
            serialization_retries=state.serialization_retries,
            quarantined=len(state.quarantined),
        )
        self._report(summary, duration, abandoned=abandoned)
        return CycleResult(
            summary=summary,
            admitted=tuple(state.admitted),
            work_remaining=state.remaining <= 0 and not abandoned,
            abandoned=abandoned,
            duration_s=duration,
            quarantined=tuple(state.quarantined),
            zone_rules=state.zone_rules,
        )

    def _round(self, state: CycleState) -> bool:
        """One claim round: claim, decide, commit in one transaction. False when nothing was due."""
        claims, quarantined, rules = self._claim(state)
        if not claims:
            # A round that only quarantined may have left due rows behind its batch limit.
            return quarantined > 0
        commits, failures, starved = decide_claims(claims, state, rules)
        self._round_size = next_round_size(
            self._round_size,
            self.claim_batch,
            served=len(claims) - starved,
            starved=starved,
            remaining=state.remaining,
        )
        # Commit first, quarantine after: a quarantine statement that fails must never keep the
        # round's good claims waiting for their lease. The undecidable claims stay held until
        # quarantined, so if anything here raises they are released first thing next cycle.
        self._commit(commits, state)
        if failures:
            self._quarantine(failures, state)
        return True

    def _commit(self, commits: Sequence[ClaimCommit], state: CycleState) -> None:
        """Commit the round's decisions, settle the uncertain ones, record what was admitted."""
        if not commits:
            return
        committing = {commit.claim.schedule_id for commit in commits}
        undecided = [claim for claim in self._held if claim.schedule_id not in committing]
        with span("ql3.commit", owner_id=self.owner_id) as current:
            batch = self.repository.commit_decisions(commits)
            state.serialization_retries += batch.serialization_retries
            by_schedule = {commit.claim.schedule_id: commit for commit in commits}
            # Uncertain commits are settled from durable facts before the round goes on; the
            # cycle counts each one once (state.uncertain), however it settles.
            settled = [
                self._settle_uncertain(by_schedule[outcome.schedule_id], state)
                if outcome.status is CommitStatus.UNCERTAIN
                else outcome
                for outcome in batch.outcomes
            ]
            committed = [o for o in settled if o.status is CommitStatus.COMMITTED]
            runs = [run for outcome in committed for run in outcome.runs]
            add_attributes(current, run_ids=[run.run_id for run in runs])
        raced = [
            by_schedule[o.schedule_id].claim for o in settled if o.status is CommitStatus.RACED
        ]
        # Committed or settled: only claims that decided nothing committable stay held, and the
        # raced ones until they are handed back (below).
        self._set_held([*undecided, *raced])
        state.outcomes.extend(settled)
        # The round's runs at once: the admission counters move once a round, not once a claim.
        self._admitted(runs, state)
        for outcome in committed:
            self._already_admitted(outcome)
        self._release_raced(raced)

    def _release_raced(self, raced: Sequence[ClusterScheduleClaim]) -> None:
        """Hand back claims whose commit or quarantine raced, if they are still this replica's.

        A commit races when its claim expired (another replica may have claimed the row since:
        then there is nothing to release) or when an admin change, a pause or a zone rules adopt
        bumped the row's version under it: that leaves the claim on the row, and nobody else
        clears it, so it would stay there, expired, until the schedule is next due (hours, for a
        daily one) and `verify` would report it as `stale_claim`. The release compares the grant,
        not the version (`same_grant`). Should it fail, the claims stay held and the next cycle
        releases them first thing.
        """
        if not raced:
            return
        released = self.repository.release_claims(raced)
        gone = {claim.schedule_id for claim in raced}
        self._set_held([claim for claim in self._held if claim.schedule_id not in gone])
        log_event(
            logger, logging.INFO, "claims.raced_released", released=released, raced=len(raced)
        )

    def _claim(self, state: CycleState) -> tuple[list[ClusterScheduleClaim], int, ZoneRules | None]:
        """Run one claim statement: its readable claims, how many it quarantined, its rules."""
        command = ClaimClusterScheduleCommand(
            owner_id=self.owner_id, claim_token=uuid.uuid4(), lease_ms=self.lease_ms
        )
        with span("ql3.claim", owner_id=self.owner_id) as current:
            claim_round = self.repository.claim_round(
                command, min(self._round_size, state.remaining)
            )
            add_attributes(current, claims=len(claim_round.claims))
        claims = list(claim_round.claims)
        self._set_held(claims)
        state.claims.extend(claims)
        state.zone_rules = claim_round.zone_rules
        self._quarantined(claim_round.quarantined, state)
        if not logger.isEnabledFor(logging.DEBUG):
            # The hot path: no per-claim record.
            return claims, len(claim_round.quarantined), claim_round.rules
        for claim in claims:
            log_event(
                logger,
                logging.DEBUG,
                "claim.acquired",
                schedule_id=claim.schedule_id,
                claim_acquired_at_ms=claim.claim_acquired_at_ms,
            )
        return claims, len(claim_round.quarantined), claim_round.rules

    def _quarantine(
        self, failures: Sequence[tuple[ClusterScheduleClaim, str]], state: CycleState
    ) -> None:
        """Quarantine undecidable claims (fenced); the rest of the round commits as usual."""
        done = self.repository.quarantine_claims(failures)
        quarantined = {item.schedule_id for item in done}
        # Quarantined rows lost their claim with it; the raced ones stay held until handed back.
        self._set_held([claim for claim in self._held if claim.schedule_id not in quarantined])
        self._quarantined(done, state)
        missed = [claim for claim, _ in failures if claim.schedule_id not in quarantined]
        for claim in sorted(missed, key=lambda claim: claim.schedule_id):
            # Its claim no longer stands exactly (expired, or the row changed): the fence refused.
            log_event(
                logger, logging.WARNING, "schedule.quarantine_raced", schedule_id=claim.schedule_id
            )
        self._release_raced(missed)

    def _quarantined(self, done: Sequence[QuarantinedSchedule], state: CycleState) -> None:
        state.quarantined.extend(done)
        for item in done:
            if self.metrics is not None:
                self.metrics.quarantined.inc()
            log_event(
                logger,
                logging.WARNING,
                "schedule.quarantined",
                schedule_id=item.schedule_id,
                reason=item.reason,
                quarantined_at_ms=item.quarantined_at_ms,
            )

    def _settle_uncertain(self, commit: ClaimCommit, state: CycleState) -> CommitOutcome:
        state.uncertain += 1
        return settle_uncertain(
            self.repository,
            commit,
            backoff=self.backoff,
            stop_requested=self.stop_requested,
            metrics=self.metrics,
        )

    def _admitted(self, runs: Sequence[AdmittedRun], state: CycleState) -> None:
        # Only outcomes that passed the fence reach here (DESIGN §5): raced or uncertain-unsettled
        # commits allocate no identity and notify nobody.
        state.admitted.extend(runs)
        if self.metrics is not None:
            self.metrics.observe_admissions(runs)
        if self.on_admitted is None:
            return
        for run in runs:
            try:
                self.on_admitted(run)
            except Exception as exc:  # noqa: BLE001  # the run is admitted; a caller's bug must not undo the cycle
                log_event(
                    logger,
                    logging.ERROR,
                    "admission.callback_failed",
                    run_id=run.run_id,
                    exc_info=exc,
                )

    def _already_admitted(self, outcome: CommitOutcome) -> None:
        """Report decided occurrences the commit found already admitted (DESIGN §5, §7).

        The UNIQUE occurrence settled them: no second run, nothing notified. It should not
        happen (the admin never places a cursor at or before an admitted occurrence), so each
        one is a WARNING an operator can trace.
        """
        for occurrence in outcome.already_admitted:
            log_event(
                logger,
                logging.WARNING,
                "commit.already_admitted",
                schedule_id=outcome.schedule_id,
                scheduled_for_ms=occurrence,
            )
        if self.metrics is not None and outcome.already_admitted:
            self.metrics.already_admitted.inc(len(outcome.already_admitted))

    def _abandon(self, exc: ClockRegressionError) -> None:
        # Fail closed (DESIGN §5): nothing was written; the claims expire by database time.
        log_event(
            logger,
            logging.WARNING,
            "cycle.clock_regression",
            schedule_id=exc.schedule_id,
            observed_at_ms=exc.observed_at_ms,
            claim_acquired_at_ms=exc.claim_acquired_at_ms,
        )
        if self.metrics is not None:
            self.metrics.clock_regressions.inc()
        self._set_held([])

    def _report(self, summary: CycleSummary, duration_s: float, *, abandoned: bool) -> None:
        if self.metrics is not None:
            self.metrics.observe_cycle(summary, duration_s)
        log_event(
            logger,
            logging.INFO,
            "cycle.summary",
            **summary.model_dump(),
            abandoned=abandoned,
            duration_ms=round(duration_s * 1000, 3),
        )
