"""Chaos harness: real PostgreSQL, real `ql3 run` processes, verdicts from the database only.

A `Scenario` owns what one chaos test starts (clusters, replicas, proxies, namespaces) and tears
it down even when the test fails. It creates schedules through `ScheduleAdmin` with an `end_at_ms`
so that every scenario has a finite, exactly known set of expected occurrences, waits for
conditions by polling the database against a monotonic deadline (never sleep-and-hope), and ends
with `finish()`: stop the replicas gracefully, then check the history (every expected occurrence
exactly once, none early, 1 run : 1 attempt : 2 events, no claim left at rest), judge it with the
test kit's oracle (`oracle_verdict`: its own SQL and cronsim, no product code) and run `ql3 verify
--json` as a subprocess, as an operator would: both must find the history clean. The harness
imports none of the product's occurrence, decision or verify code (the import audit refuses it).
Rule zero holds here too: every time value comes from the database.

Expected occurrences come from `expected.py` (cronsim), never from QL3's cron functions. Every
lateness bound is a `Bound`: named parts whose sum and arithmetic are printed in EVIDENCE.md.
A `wait_until` timeout only stops a hung run, unless it is built from a `Bound` (the recovery
after network-faults' partition), which then says so in the scenario's notes.

The harness is split by what it holds, and this module re-exports what the scenarios use:
`bounds` (the parts of a lateness bound), `probes` (queries, the database clock, polling),
`replicas` (the `ql3` processes) and `verdict` (the history read back and judged, the evidence
rows); `Scenario` here ties them together for one test.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bounds import (
    BASELINE_WORST_MS,
    CYCLE_SLACK_MS,
    LATE_WAKE_MS,
    POLL_INTERVAL_MS,
    SLACK,
    Bound,
)
from expected import first_after, occurrences_between
from probes import (
    NOW_SQL,
    POLL_S,
    ROOT,
    Params,
    Query,
    db_now_ms,
    fetch,
    pause,
    ql3_executable,
    wait_until,
)
from ql3_cluster_postgres import ScheduleAdmin, ScheduleRecord
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, TaskExecution
from ql3_testkit import Ql3Database, ThrowawayCluster, oracle_verdict, prepare_ql3_database
from replicas import LoggedProcess, Replica, sum_events
from verdict import EVIDENCE, Evidence, Outcome, assert_clean, operator_verify, read_history

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "BASELINE_WORST_MS",
    "CYCLE_SLACK_MS",
    "EVERY_SECOND",
    "EVIDENCE",
    "LATE_WAKE_MS",
    "NOW_SQL",
    "POLL_INTERVAL_MS",
    "POLL_S",
    "ROOT",
    "SLACK",
    "Bound",
    "Evidence",
    "LoggedProcess",
    "Outcome",
    "Params",
    "Query",
    "Replica",
    "Scenario",
    "db_now_ms",
    "fetch",
    "operator_verify",
    "pause",
    "ql3_executable",
    "sum_events",
    "wait_until",
]

EVERY_SECOND = "* * * * * *"


class Scenario:
    """Everything one chaos test starts, torn down by `close()` (the fixture calls it)."""

    def __init__(self, name: str, items: str) -> None:
        self.evidence = Evidence(name, items)
        EVIDENCE.append(self.evidence)
        self.started = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"ql3-chaos-{name}-"))
        self.replicas: list[Replica] = []
        self.clusters: list[ThrowawayCluster] = []
        self._cleanups: list[Callable[[], None]] = []
        self.db: Ql3Database | None = None
        self.cluster: ThrowawayCluster | None = None
        self.schedules: dict[int, tuple[ScheduleDefinition, int]] = {}  # id -> (def, cursor)
        # First cursors the independent engine could not pin to one instant (see add_schedules).
        self.bracketed_first_cursors = 0
        self._replica_count = 0

    # -- set-up ---------------------------------------------------------------------------------

    def start_cluster(self, **options: Any) -> ThrowawayCluster:  # noqa: ANN401 - passed through
        """Start a throwaway PostgreSQL owned by this scenario."""
        cluster = ThrowawayCluster(name=f"chaos{len(self.clusters)}", **options).start()
        self.clusters.append(cluster)
        return cluster

    def prepare(
        self,
        cluster: ThrowawayCluster | None = None,
        **options: Any,  # noqa: ANN401 - ThrowawayCluster arguments
    ) -> Ql3Database:
        """Start a cluster (unless given) and a provisioned, migrated QL3 database on it."""
        self.cluster = cluster if cluster is not None else self.start_cluster(**options)
        name = "ql3_" + "".join(c if c.isalnum() else "_" for c in self.evidence.scenario)
        self.db = prepare_ql3_database(self.cluster, name)
        return self.db

    def on_close(self, cleanup: Callable[[], None]) -> None:
        """Run `cleanup` at tear-down (last registered runs first)."""
        self._cleanups.append(cleanup)

    def fault(self, description: str) -> None:
        """Record an injected fault for the evidence row."""
        self.evidence.faults.append(description)

    def note(self, text: str) -> None:
        """Record a measured fact for the evidence row."""
        self.evidence.notes.append(text)

    @property
    def database(self) -> Ql3Database:
        """The scenario's QL3 database."""
        assert self.db is not None, "call prepare() first"
        return self.db

    def dsn(self, role: str = "admin", **params: str) -> str:
        """Conninfo of the scenario database for a role's login user."""
        return self.database.dsn(role, **params)

    def now_ms(self) -> int:
        """Read the database clock."""
        return db_now_ms(self.dsn())

    def add_schedules(
        self,
        count: int,
        *,
        window_s: float,
        cron: str = EVERY_SECOND,
        timezone: str = "UTC",
        policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE,
        grace_ms: int = 60_000,
        prefix: str = "s",
        dsn: str | None = None,
        execution: TaskExecution | None = None,
        engine_timezone: str | None = None,
    ) -> list[int]:
        """Create `count` schedules ending `window_s` after now (database time).

        `execution` is what their runs execute (a command for `ql3 worker`); none by default:
        the admission scenarios only judge what was admitted. `engine_timezone` is the zone
        whose real rules the database's recorded rules give `timezone` (a made-up version where
        New York is Tokyo, say): the independent engine checks the first cursor in that zone.

        Each first cursor is checked against the independent engine: QL3 places it at the first
        occurrence strictly after the database time its admin transaction read, which lies
        between the previous read (`lower`) and the row's `created_at_ms`; so the cursor must be
        one of cronsim's occurrences in (lower, first occurrence after created_at_ms].
        """
        ids = []
        with ScheduleAdmin(dsn or self.dsn("admin")) as admin:
            lower = admin.database_now_ms()
            end = lower + int(window_s * 1000)
            definition = ScheduleDefinition(
                cron=cron,
                timezone=timezone,
                misfire_policy=policy,
                misfire_grace_ms=grace_ms,
                end_at_ms=end,
            )
            for index in range(count):
                record = admin.add_schedule(
                    f"{prefix}{index}-{uuid.uuid4().hex[:6]}", definition, execution=execution
                )
                assert record.next_due_at_ms is not None
                self._check_first_cursor(
                    definition, record.next_due_at_ms, lower, record, engine_timezone or timezone
                )
                self.schedules[record.schedule_id] = (definition, record.next_due_at_ms)
                ids.append(record.schedule_id)
                lower = record.created_at_ms  # the next admin transaction reads no earlier
        return ids

    def _check_first_cursor(
        self,
        definition: ScheduleDefinition,
        cursor: int,
        lower: int,
        record: ScheduleRecord,
        zone: str,
    ) -> None:
        upper = first_after(definition.cron, zone, record.created_at_ms)
        candidates = occurrences_between(definition.cron, zone, lower, upper)
        assert cursor in candidates, (
            f"schedule {record.schedule_id}: first cursor {cursor} is not cronsim's first"
            f" occurrence of {definition.cron!r} after the admin's read in [{lower},"
            f" {record.created_at_ms}]: expected one of {candidates}"
        )
        if len(candidates) > 1:
            self.bracketed_first_cursors += 1

    def expected_occurrences(
        self, schedule_ids: Iterable[int] | None = None
    ) -> set[tuple[int, int]]:
        """Every (schedule, occurrence) from each first cursor to end_at_ms, by cronsim."""
        expected: set[tuple[int, int]] = set()
        for schedule_id in schedule_ids if schedule_ids is not None else self.schedules:
            definition, first = self.schedules[schedule_id]
            assert definition.end_at_ms is not None
            if first > definition.end_at_ms:
                continue
            rest = occurrences_between(
                definition.cron, definition.timezone, first, definition.end_at_ms
            )
            expected.update((schedule_id, at) for at in (first, *rest))
        return expected

    def replica(
        self,
        *,
        lease_ms: int = 2_000,
        dsn: str | None = None,
        start: bool = True,
        **options: Any,  # noqa: ANN401 - Replica fields
    ) -> Replica:
        """Create (and start) a `ql3 run` replica as the ql3_runtime login."""
        self._replica_count += 1
        owner = f"{self.evidence.scenario}-r{self._replica_count}"
        replica = Replica(
            owner_id=owner,
            dsn=dsn or self.dsn("runtime"),
            log_path=self.workdir / f"{owner}.log",
            lease_ms=lease_ms,
            **options,
        )
        self.replicas.append(replica)
        return replica.start() if start else replica

    # -- waiting --------------------------------------------------------------------------------

    def exhausted(self, schedule_ids: Iterable[int] | None = None, dsn: str | None = None) -> bool:
        """Tell whether every given schedule has passed its end (state exhausted)."""
        ids = list(schedule_ids if schedule_ids is not None else self.schedules)
        rows = fetch(
            dsn or self.dsn(),
            "SELECT count(*) FROM ql3.trigger_schedules WHERE id = ANY(%s) AND state = 'exhausted'",
            (ids,),
        )
        return int(rows[0][0]) == len(ids)

    def wait_exhausted(self, timeout_s: float, dsn: str | None = None) -> float:
        """Wait until every schedule of the scenario is exhausted; fail with replica logs."""
        try:
            return wait_until(
                lambda: self.exhausted(dsn=dsn),
                timeout_s=timeout_s,
                what="every schedule is exhausted",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def fetch_admin(self, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
        """Run one read-only query as the ql3_admin login."""
        return fetch(self.dsn("admin"), query, params)

    def fetch_superuser(self, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
        """Run one query as the cluster's superuser (server views, configuration reloads)."""
        return fetch(self.database.superuser_dsn, query, params)

    def runs_count(self, dsn: str | None = None) -> int:
        """How many runs exist now."""
        return int(fetch(dsn or self.dsn(), "SELECT count(*) FROM ql3.runs")[0][0])

    def logs(self) -> str:
        """Tails of every replica log, for failure messages."""
        parts = [
            f"--- {r.owner_id} (alive={r.alive}, exit={r.exit_code}) ---\n{r.tail()}"
            for r in self.replicas
        ]
        return "\n".join(parts)

    # -- verdict --------------------------------------------------------------------------------

    def wait_ready(self) -> None:
        """Wait until every live replica is connected."""
        for replica in self.replicas:
            if replica.alive:
                replica.wait_ready()

    def stop_replicas(self) -> None:
        """Stop every live replica gracefully and require exit code 0."""
        codes = {r.owner_id: r.stop() for r in self.replicas if r.alive}
        bad = {owner: code for owner, code in codes.items() if code != 0}
        assert not bad, f"replicas did not stop cleanly: {bad}\n{self.logs()}"

    def retries_40001(self) -> int:
        """40001 retries reported by every replica of the scenario."""
        return sum(r.serialization_retries() for r in self.replicas)

    def finish(
        self,
        *,
        expected: set[tuple[int, int]] | None = None,
        dsn: str | None = None,
        bound: Bound | None = None,
        only: Iterable[int] | None = None,
        executed: bool = False,
    ) -> Outcome:
        """Stop replicas, then check history and claims from the database; record evidence.

        Expectations come from cronsim (`expected_occurrences`), never from QL3's cron code; the
        test kit's oracle (the same rules from DESIGN, its own SQL and cronsim) judges the whole
        history, and `ql3 verify` (the product's checker, run as the operator runs it) must agree.
        `only` limits the exact expected-vs-admitted comparison to those schedules (others have
        scenario-specific checks); the oracle, `ql3 verify` and the row/claim checks cover
        everything. With `executed`, workers ran the attempts: a run may have several attempts
        and their events (the worker scenarios judge those themselves, and both checkers judge
        their shape), so rows are only required to be at least 1:1:2.
        """
        self.stop_replicas()
        dsn = dsn or self.dsn("admin")
        scope = list(only) if only is not None else list(self.schedules)
        want = self.expected_occurrences(scope) if expected is None else expected
        history = read_history(dsn, scope, want)
        if history.latest is not None:
            self.note(history.latest)
        oracle = oracle_verdict(dsn, stale_claim_grace_ms=0)
        report = operator_verify(dsn)
        outcome = Outcome(
            expected=len(want),
            admitted=len(history.seen),
            duplicated=history.duplicated,
            early=history.early,
            missing=len(history.missing),
            unexpected=len(history.unexpected),
            max_lateness_ms=history.lateness_ms,
            retries_40001=self.retries_40001(),
            report=report,
            oracle=oracle,
        )
        self.evidence.record(outcome)
        if bound is not None:
            self.evidence.bound = str(bound)
        if self.bracketed_first_cursors:
            self.note(
                f"{self.bracketed_first_cursors} first cursor(s) fell on a second boundary inside"
                " the admin's transaction: checked to be one of cronsim's two candidates"
            )
        assert_clean(history, outcome, executed=executed, bound=bound, logs=self.logs)
        return outcome

    # -- tear-down ------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill leftover replicas, run clean-ups, stop clusters; never raises."""
        for replica in self.replicas:
            if replica.alive:
                with contextlib.suppress(Exception):
                    replica.kill()
        for cleanup in reversed(self._cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        for cluster in reversed(self.clusters):
            with contextlib.suppress(Exception):
                cluster.stop()
        self.evidence.duration_s = time.monotonic() - self.started
