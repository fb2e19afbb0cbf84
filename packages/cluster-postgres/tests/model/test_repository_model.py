"""A model-based test: hypothesis drives the real repository against real PostgreSQL.

A `RuleBasedStateMachine` interleaves what replicas, admins, workers and the database clock do to
one QL3 database: claims by two owners under short and long leases, fenced commits, commits whose
reply is "lost" (the outcome is then settled again with `resolve_uncertain_commit`, as a
Coordinator does after an uncertain COMMIT, DESIGN §6), commits that were never sent but are
settled anyway, releases, steps of the database clock forward and back (libfaketime, DESIGN §1),
admin pauses, resumes and redefinitions, and worker takes and finishes through the ingress.

After every step the database is compared with a small reference model (DESIGN §4, §5, §7):
- the Runs are exactly the occurrences the model saw committed (none twice, none unexplained);
- no Run is early (committed before its occurrence by the database clock);
- a schedule's cursor is always after every occurrence decided for it (a Run or a skip record),
  and only an admin change may move it backwards;
- a settled lost reply reports what the first answer reported and writes nothing more;
- at most one live attempt per Run, its first attempt present.
At the end, the test kit's independent oracle judges the whole history and `verify_history` must
agree with it (`verify_compare.compare`).

Examples are derandomized (the same sequences on every run; a failure prints its steps) and
small enough that the file runs in well under a minute.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg.rows import dict_row
from ql3_cluster_postgres import (
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    WorkerIngress,
    verify_history,
)
from ql3_runtime_core import (
    AttemptOutcome,
    AttemptResult,
    ClaimCommit,
    ClockRegressionError,
    CommitOutcome,
    CommitStatus,
    MisfirePolicy,
    ScheduleDefinition,
    TaskExecution,
)
from ql3_testkit import drop_database, oracle_verdict, prepare_ql3_database
from repo_helpers import command, decide
from verify_compare import compare

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster

# Claims the model leaves standing are released or expire; none may be judged "at rest".
GRACE_MS = 7 * 24 * 3_600_000
EXECUTION = TaskExecution(command="true", max_attempts=2, retry_backoff_ms=0)
# name -> the definitions an admin may switch it between (cron, policy, grace)
DEFINITIONS: dict[str, list[ScheduleDefinition]] = {
    "every-second": [
        ScheduleDefinition(cron="* * * * * *", misfire_policy=MisfirePolicy.CATCH_UP),
        ScheduleDefinition(cron="*/2 * * * * *", misfire_policy=MisfirePolicy.CATCH_UP),
    ],
    "fire-once": [
        ScheduleDefinition(
            cron="*/2 * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=1_500
        ),
        ScheduleDefinition(
            cron="*/3 * * * * *", misfire_policy=MisfirePolicy.FIRE_ONCE, misfire_grace_ms=1_000
        ),
    ],
    "skip": [
        ScheduleDefinition(
            cron="*/3 * * * * *", misfire_policy=MisfirePolicy.SKIP, misfire_grace_ms=1_000
        ),
        ScheduleDefinition(
            cron="* * * * * *", misfire_policy=MisfirePolicy.SKIP, misfire_grace_ms=2_000
        ),
    ],
}
STATE_SQL = """SELECT s.id, s.next_due_at_ms, s.state,
    (SELECT max(r.scheduled_for_ms) FROM ql3.runs AS r WHERE r.schedule_id = s.id) AS last_run,
    (SELECT max(k.last_skipped_ms) FROM ql3.skipped_occurrences AS k
     WHERE k.schedule_id = s.id) AS last_skip
FROM ql3.trigger_schedules AS s ORDER BY s.id"""
NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
RUNS_SQL = "SELECT schedule_id, scheduled_for_ms, created_at_ms FROM ql3.runs"
ATTEMPTS_SQL = """SELECT r.id,
    count(a.id) FILTER (WHERE a.state IN ('queued', 'running')) AS live,
    count(a.id) FILTER (WHERE a.attempt_number = 1) AS first
FROM ql3.runs AS r LEFT JOIN ql3.attempts AS a ON a.run_id = r.id
GROUP BY r.id"""


class RepositoryModel(RuleBasedStateMachine):
    """One fresh database per example; the model is what the database must hold."""

    cluster: ClassVar[ThrowawayCluster]
    template: ClassVar[str]
    start_ms: ClassVar[int]  # the frozen clock's first instant, a whole minute
    made: ClassVar[int] = 0
    seen: ClassVar[Counter[str]] = Counter()  # what the examples did, for the final check

    def __init__(self) -> None:
        """Clone a migrated database and create the three schedules (one revision each)."""
        super().__init__()
        RepositoryModel.made += 1
        # A frozen database clock that only the steps move: the same sequence of rules meets
        # the same database on every run, so hypothesis can replay and shrink a failure.
        self.now_ms = self.start_ms
        self.latest_ms = self.start_ms
        self.cluster.freeze_clock_at_ms(self.start_ms)
        self.name = f"ql3_model_{uuid.uuid4().hex[:10]}"
        self.db: Ql3Database = prepare_ql3_database(self.cluster, self.name, template=self.template)
        self.repos = {
            owner: PostgresScheduleRepository(self.db.dsn("runtime")) for owner in ("a", "b")
        }
        self.admin = ScheduleAdmin(self.db.dsn("admin"))
        self.ingress = WorkerIngress(self.db.dsn("worker_ingress"))
        self.reader = psycopg.connect(self.db.dsn("admin"), autocommit=True)
        self.admin.apply_schedules(
            [
                ScheduleSpec(name=n, definition=d[0], execution=EXECUTION)
                for n, d in DEFINITIONS.items()
            ]
        )
        self.pending: list[tuple[str, ClaimCommit]] = []
        self.admitted: set[tuple[int, int]] = set()
        # Each schedule's cursor after the previous step; None after an admin change, which
        # places the cursor anew (DESIGN §7) and may place it before the old one.
        self.cursors: dict[int, int | None] | None = None

    # -- replicas ---------------------------------------------------------------------------

    @rule(
        owner=st.sampled_from(["a", "b"]),
        lease_ms=st.sampled_from([1_000, 3_000, 30_000]),
        wait_ms=st.sampled_from([0, 1_000, 2_500, 6_000]),
    )
    def claim(self, owner: str, lease_ms: int, wait_ms: int) -> None:
        """Let time pass, then claim what is due; each claim was due at its acquired time (§3)."""
        if wait_ms:
            self.step_clock(wait_ms)
        self.seen["claim_rounds"] += 1
        for claim in self.repos[owner].claim_due_schedules(command(owner, lease_ms), 8):
            assert claim.next_due_at_ms <= claim.claim_acquired_at_ms, claim
            self.pending.append((owner, decide(claim)))
            self.seen["claims"] += 1

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), lost_reply=st.booleans())
    def commit(self, data: st.DataObject, *, lost_reply: bool) -> None:
        """Commit one decision; with a lost reply, settle it again: the same answer, no rows."""
        owner, pending = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        repo = self.repos[owner]
        try:
            outcome = repo.commit_decisions([pending]).outcomes[0]
        except ClockRegressionError:
            self.seen["clock_regression"] += 1
            return  # fail closed: nothing written (the invariants check it)
        self.seen[f"commit_{outcome.status.value}"] += 1
        if lost_reply:
            self.seen["lost_reply"] += 1
            before = self._runs()
            settled = repo.resolve_uncertain_commit(pending)
            assert settled.status is outcome.status, (outcome, settled)
            assert settled.runs == outcome.runs, (outcome, settled)
            assert self._runs() == before
        self._absorb(pending, outcome)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def settle_unsent(self, data: st.DataObject) -> None:
        """Settle a commit whose request never reached the server: committed once, or raced."""
        owner, pending = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        try:
            outcome = self.repos[owner].resolve_uncertain_commit(pending)
        except ClockRegressionError:
            self.seen["clock_regression"] += 1
            return
        assert outcome.status is not CommitStatus.UNCERTAIN, outcome
        self.seen[f"unsent_{outcome.status.value}"] += 1
        self._absorb(pending, outcome)

    @precondition(lambda self: self.pending)
    @rule()
    def release(self) -> None:
        """Release every pending claim (a graceful stop); their commits are never sent."""
        for owner in ("a", "b"):
            claims = [p.claim for o, p in self.pending if o == owner]
            self.repos[owner].release_claims(claims)
        self.pending.clear()

    def _absorb(self, pending: ClaimCommit, outcome: CommitOutcome) -> None:
        if outcome.status is not CommitStatus.COMMITTED:
            return
        sid = pending.claim.schedule_id
        admitted = {(sid, t) for t in pending.decision.occurrences}
        fresh = admitted - {(sid, t) for t in outcome.already_admitted}
        assert not fresh & self.admitted, ("admitted twice", sorted(fresh & self.admitted))
        self.admitted |= admitted

    # -- the database clock ------------------------------------------------------------------

    @rule(step_ms=st.sampled_from([400, 1_500, 4_000, 20_000, -2_500]))
    def step_clock(self, step_ms: int) -> None:
        """Step the frozen database clock (libfaketime), forward or back, never below its start."""
        self.seen["clock_steps"] += 1
        self.now_ms = max(self.start_ms, self.now_ms + step_ms)
        self.latest_ms = max(self.latest_ms, self.now_ms)
        self.cluster.freeze_clock_at_ms(self.now_ms)

    # -- admin -------------------------------------------------------------------------------

    @rule(name=st.sampled_from(sorted(DEFINITIONS)), action=st.sampled_from(["pause", "resume"]))
    def pause_or_resume(self, name: str, action: str) -> None:
        """Pause or resume a schedule (a no-op when it already is)."""
        getattr(self.admin, action)(name)
        self.cursors = None

    @rule(name=st.sampled_from(sorted(DEFINITIONS)), which=st.sampled_from([0, 1]))
    def redefine(self, name: str, which: int) -> None:
        """Apply one of the schedule's definitions: a new revision, standing claims race."""
        spec = ScheduleSpec(name=name, definition=DEFINITIONS[name][which], execution=EXECUTION)
        self.admin.apply_schedules([spec])
        self.cursors = None

    # -- workers -----------------------------------------------------------------------------

    @rule(outcome=st.sampled_from([AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED]))
    def work(self, outcome: AttemptOutcome) -> None:
        """Take what is eligible and finish it; a failure queues a successor up to max_attempts."""
        token = uuid.uuid4()
        taken = self.ingress.take_attempts(
            worker_id="model-w", lease_token=token, lease_ms=10_000, limit=4
        )
        self.seen["attempts_taken"] += len(taken)
        for attempt in taken:
            assert attempt.attempt_number <= EXECUTION.max_attempts, attempt
            result = AttemptResult(
                outcome=outcome, exit_code=0 if outcome.value == "succeeded" else 1
            )
            self.ingress.finish_attempt(attempt.attempt_id, token, result)

    # -- the model's invariants --------------------------------------------------------------

    def _fetch(self, sql: str) -> list[dict[str, Any]]:
        # Fixed statements of this module (no input): the model's own reads.
        return self.reader.cursor(row_factory=dict_row).execute(sql).fetchall()

    def _runs(self) -> set[tuple[int, int]]:
        return {(r["schedule_id"], r["scheduled_for_ms"]) for r in self._fetch(RUNS_SQL)}

    @invariant()
    def runs_are_what_the_model_committed(self) -> None:
        """Each occurrence admitted at most once, only by a commit the model saw, never early."""
        rows = self._fetch(RUNS_SQL)
        assert {(r["schedule_id"], r["scheduled_for_ms"]) for r in rows} == self.admitted
        early = [r for r in rows if r["created_at_ms"] < r["scheduled_for_ms"]]
        assert not early, early

    @invariant()
    def cursors_are_past_every_decided_occurrence(self) -> None:
        """DESIGN §4, §7: the cursor is the first undecided occurrence, after every decided one."""
        for row in self._fetch(STATE_SQL):
            cursor = row["next_due_at_ms"]
            decided = max(
                (v for v in (row["last_run"], row["last_skip"]) if v is not None), default=None
            )
            if cursor is not None and decided is not None:
                assert cursor > decided, row

    @invariant()
    def cursors_never_move_back(self) -> None:
        """DESIGN §4: claims, commits, releases and clock steps never move a cursor backwards."""
        now = {row["id"]: row["next_due_at_ms"] for row in self._fetch(STATE_SQL)}
        if self.cursors is not None:
            for sid, before in self.cursors.items():
                after = now.get(sid)
                if before is not None and after is not None:
                    assert after >= before, (sid, before, after)
        self.cursors = now

    @invariant()
    def one_live_attempt_and_one_first_attempt_per_run(self) -> None:
        """DESIGN §10: at most one live attempt per Run; every Run has its first attempt."""
        bad = [r for r in self._fetch(ATTEMPTS_SQL) if r["live"] > 1 or r["first"] != 1]
        assert not bad, bad

    def teardown(self) -> None:
        """Settle, then judge the whole history with the oracle and verify_history; drop it."""
        try:
            if self.pending:
                self.release()
            # Never end behind a time already written: the oracle reports runs in the future.
            self.cluster.freeze_clock_at_ms(self.latest_ms + 1)
            dsn = self.db.dsn("admin")
            oracle = oracle_verdict(dsn, stale_claim_grace_ms=GRACE_MS)
            assert oracle.ok, oracle.lines()
            compare(verify_history(dsn, stale_claim_grace_ms=GRACE_MS), oracle)
        finally:
            for repo in self.repos.values():
                repo.close()
            self.admin.close()
            self.ingress.close()
            self.reader.close()
            self.cluster.set_clock_offset_ms(0)
            drop_database(self.cluster, self.name)


def test_the_repository_follows_its_model(
    faketime_cluster: ThrowawayCluster, faketime_template: str
) -> None:
    """Random interleavings of replicas, admins, workers and clock steps keep every invariant."""
    RepositoryModel.cluster = faketime_cluster
    RepositoryModel.template = faketime_template
    RepositoryModel.made = 0
    RepositoryModel.seen = Counter()
    faketime_cluster.set_clock_offset_ms(0)
    with psycopg.connect(faketime_cluster.dsn(), autocommit=True) as conn:
        row = conn.execute(NOW_SQL).fetchone()
    assert row is not None
    # Two minutes ahead, on a whole minute: after anything the template holds, and the same
    # alignment of the second-level crons in every run.
    RepositoryModel.start_ms = (int(row[0]) // 60_000 + 2) * 60_000
    run_state_machine_as_test(
        RepositoryModel,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )
    seen = RepositoryModel.seen
    print(f"model: {RepositoryModel.made} databases, {dict(sorted(seen.items()))}")  # noqa: T201
    # The examples really reached the paths the invariants are about.
    assert RepositoryModel.made >= 25
    for path in ("commit_committed", "lost_reply", "unsent_committed", "attempts_taken"):
        assert seen[path] > 0, seen
    # The fences were met too: a raced commit (expiry, takeover, admin change) or a clock
    # regression refused.
    assert seen["commit_raced"] + seen["unsent_raced"] + seen["clock_regression"] > 0, seen
