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
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from expected import first_after, occurrences_between
from ql3_cluster_postgres import ScheduleAdmin, ScheduleRecord, VerifyReport
from ql3_runtime_core import MisfirePolicy, ScheduleDefinition, TaskExecution
from ql3_testkit import (
    OracleVerdict,
    Ql3Database,
    ThrowawayCluster,
    oracle_verdict,
    prepare_ql3_database,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
EVERY_SECOND = "* * * * * *"
NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
POLL_S = 0.1

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


Params = Sequence[object] | Mapping[str, object] | None
Query = str  # the chaos suite only sends literal SQL text


def ql3_executable() -> Path:
    """Return the `ql3` console script of this environment, or fail saying what to install."""
    candidate = Path(sys.executable).parent / "ql3"
    if not candidate.exists():
        msg = (
            f"chaos: no `ql3` console script next to {sys.executable}; install the"
            " ql3-cluster-control wheel into this environment (nox -s chaos does)"
        )
        raise AssertionError(msg)
    return candidate


def db_now_ms(dsn: str) -> int:
    """Read the database clock (the only clock a verdict may use)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(NOW_SQL).fetchone()
    assert row is not None
    return int(row[0])


def operator_verify(dsn: str, timeout_s: float = 900) -> VerifyReport:
    """Run `ql3 verify --json` as a subprocess (the operator's tool) and return its report.

    Its exit code must say what its JSON says (0: clean, 1: violations); anything else (a crash,
    a refusal) fails the scenario with the command's output.
    """
    # Our own console script with a scenario DSN: no untrusted input.
    result = subprocess.run(
        [str(ql3_executable()), "verify", "--json", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode not in (0, 1):
        msg = f"ql3 verify exited {result.returncode}: {result.stderr.strip()[-2000:]}"
        raise AssertionError(msg)
    report = VerifyReport.model_validate_json(result.stdout)
    assert report.ok is (result.returncode == 0), (result.returncode, report.lines())
    return report


def fetch(dsn: str, query: Query, params: Params = None) -> list[tuple[Any, ...]]:
    """Run one statement on a fresh autocommit connection; return its rows (none for DDL)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        cursor = conn.execute(query, params)
        return list(cursor.fetchall()) if cursor.description is not None else []


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = POLL_S,
) -> float:
    """Poll `condition` until true; return the seconds waited, or fail naming `what`."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        with contextlib.suppress(psycopg.OperationalError):
            if condition():
                return time.monotonic() - started
        if time.monotonic() > deadline:
            msg = f"chaos: timed out after {timeout_s:.0f} s waiting until {what}"
            raise AssertionError(msg)
        time.sleep(interval_s)


def pause(seconds: float) -> None:
    """Let a fault act for a fixed span of monotonic time (a fault window, not a wait-for)."""
    time.sleep(seconds)


class LoggedProcess:
    """What chaos knows of a `ql3` process it started: alive, killed, stopped, its JSON log.

    A mixin for the dataclasses that start one (`Replica`, `workers.WorkerProcess`), which
    declare `process`, `exit_code` and `log_path` as fields.
    """

    process: subprocess.Popen[bytes] | None
    exit_code: int | None
    log_path: Path
    # How long a graceful stop may take before the process is killed.
    stop_timeout_s: ClassVar[float] = 20

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> int:
        """SIGKILL the process and return its exit status (-9 proves the kill took effect)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.exit_code = self.process.wait(10)
        return self.exit_code

    def stop(self, timeout_s: float | None = None) -> int:
        """SIGTERM (a graceful stop) and return the exit code; killed after the timeout."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.process.wait(timeout_s or self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.exit_code = self.process.wait(10)
        else:
            self.exit_code = self.process.returncode
        return self.exit_code

    def records(self) -> list[dict[str, Any]]:
        """Parse the JSON log lines written so far (other lines are ignored)."""
        records: list[dict[str, Any]] = []
        if not self.log_path.exists():
            return records
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def events(self, name: str) -> list[dict[str, Any]]:
        """Log records of one `event` kind (e.g. cycle.summary, attempt.finished)."""
        return [record for record in self.records() if record.get("event") == name]


@dataclass
class Replica(LoggedProcess):
    """One `ql3 run` process with JSON logs in a file."""

    owner_id: str
    dsn: str
    log_path: Path
    lease_ms: int
    poll_interval_ms: int = POLL_INTERVAL_MS
    claim_batch: int = 16
    env_extra: dict[str, str] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None

    def start(self) -> Replica:
        """Start the process (the DSN travels in QL3_DSN, not on the command line)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("QL3_")}
        env.update(self.env_extra)
        env["QL3_DSN"] = self.dsn
        # Its sessions are findable in pg_stat_activity (e.g. "are a killed replica's gone?").
        env["QL3_APPLICATION_NAME"] = self.owner_id[:63]
        argv = [
            *self.prefix,
            str(ql3_executable()),
            "run",
            "--owner-id",
            self.owner_id,
            "--lease-ms",
            str(self.lease_ms),
            "--poll-interval-ms",
            str(self.poll_interval_ms),
            "--claim-batch",
            str(self.claim_batch),
            "--log-format",
            "json",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def serialization_retries(self) -> int:
        """Sum of the 40001 retries reported in this replica's cycle summaries."""
        return sum(int(r.get("serialization_retries", 0)) for r in self.events("cycle.summary"))

    def admitted(self) -> int:
        """Sum of the admissions reported in this replica's cycle summaries."""
        return sum(int(r.get("admitted", 0)) for r in self.events("cycle.summary"))

    def wait_ready(self, timeout_s: float = 30) -> None:
        """Wait until the replica has connected and checked the schema (its log says so)."""
        try:
            wait_until(
                lambda: bool(self.events("service.connected")),
                timeout_s=timeout_s,
                what=f"replica {self.owner_id} is connected",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.tail()}") from None

    def tail(self, lines: int = 15) -> str:
        """Return the end of the log, for failure messages."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Outcome:
    """What `finish()` measured; the row of docs/EVIDENCE.md comes from it."""

    expected: int
    admitted: int
    duplicated: int
    early: int
    missing: int
    unexpected: int
    max_lateness_ms: int
    retries_40001: int
    report: VerifyReport  # `ql3 verify --json`, run as a subprocess
    oracle: OracleVerdict  # the test kit's independent oracle


@dataclass
class Evidence:
    """One row of docs/EVIDENCE.md."""

    scenario: str
    items: str
    faults: list[str] = field(default_factory=list)
    expected: int | None = None
    admitted: int | None = None
    duplicated: int | None = None
    early: int | None = None
    missing: int | None = None
    retries_40001: int | None = None
    max_lateness_ms: int | None = None
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    outcome: str = "not run"
    # The scenario's lateness bound and its derivation, e.g. "1050 = poll 200 + ...".
    bound: str | None = None
    # What the outcome column shows after "passed" (the scenario's headline measurement).
    verdict: str | None = None


EVIDENCE: list[Evidence] = []


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
        rows = fetch(
            dsn,
            "SELECT schedule_id, scheduled_for_ms, created_at_ms, owner_id FROM ql3.runs"
            " ORDER BY id",
        )
        runs = [row[:3] for row in rows if row[0] in scope]
        if rows:
            late = max(rows, key=lambda row: row[2] - row[1])
            self.note(
                f"latest admission: schedule {late[0]} occurrence {late[1]} by {late[3]},"
                f" {late[2] - late[1]} ms late"
            )
        seen: dict[tuple[int, int], int] = {}
        for schedule_id, at, _ in runs:
            seen[(schedule_id, at)] = seen.get((schedule_id, at), 0) + 1
        duplicated = sum(count - 1 for count in seen.values())
        early = sum(1 for _, at, created in runs if created < at)
        lateness = max((created - at for _, at, created in runs), default=0)
        missing = want - set(seen)
        unexpected = set(seen) - want
        counts = fetch(
            dsn,
            "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.attempts),"
            " (SELECT count(*) FROM ql3.events),"
            " (SELECT count(*) FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL)",
        )[0]
        oracle = oracle_verdict(dsn, stale_claim_grace_ms=0)
        report = operator_verify(dsn)
        outcome = Outcome(
            expected=len(want),
            admitted=len(seen),
            duplicated=duplicated,
            early=early,
            missing=len(missing),
            unexpected=len(unexpected),
            max_lateness_ms=int(lateness),
            retries_40001=self.retries_40001(),
            report=report,
            oracle=oracle,
        )
        self._record(outcome)
        if bound is not None:
            self.evidence.bound = str(bound)
        if self.bracketed_first_cursors:
            self.note(
                f"{self.bracketed_first_cursors} first cursor(s) fell on a second boundary inside"
                " the admin's transaction: checked to be one of cronsim's two candidates"
            )
        assert oracle.ok, "the oracle found violations:\n" + "\n".join(oracle.lines())
        assert report.ok, "ql3 verify found violations:\n" + "\n".join(report.lines())
        assert duplicated == 0, f"{duplicated} duplicate admissions"
        assert early == 0, f"{early} early admissions"
        assert not missing, f"{len(missing)} expected occurrences missing: {sorted(missing)[:10]}"
        assert not unexpected, f"{len(unexpected)} unexpected admissions: {sorted(unexpected)[:10]}"
        runs_n, attempts_n, events_n, claims_n = (int(value) for value in counts)
        at_admission = (attempts_n, events_n) == (runs_n, 2 * runs_n)
        if executed:
            at_admission = attempts_n >= runs_n and events_n >= 2 * runs_n
        assert at_admission, (
            f"rows are not 1:1:2: runs={runs_n} attempts={attempts_n} events={events_n}"
        )
        assert claims_n == 0, f"{claims_n} claims left at rest after a graceful stop"
        if bound is not None:
            assert lateness <= bound.ms, (
                f"an occurrence was admitted {lateness} ms late, bound {bound}\n{self.logs()}"
            )
        return outcome

    def _record(self, outcome: Outcome) -> None:
        row = self.evidence
        row.expected = outcome.expected
        row.admitted = outcome.admitted
        row.duplicated = outcome.duplicated
        row.early = outcome.early
        row.missing = outcome.missing
        row.retries_40001 = outcome.retries_40001
        row.max_lateness_ms = outcome.max_lateness_ms

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


def sum_events(replicas: Sequence[Replica], name: str) -> int:
    """How many log records of kind `name` all the replicas wrote."""
    return sum(len(r.events(name)) for r in replicas)
