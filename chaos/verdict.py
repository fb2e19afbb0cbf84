"""The end of every scenario: what the history holds, the two independent judges, the evidence row.

`read_history` reads the runs, attempts, events and claims left in the database and compares them
with the expected occurrences (cronsim's, from `expected.py`); the test kit's oracle and `ql3
verify --json` (run as a subprocess, as an operator would) judge the same history, and
`assert_clean` fails the scenario on anything either finds. None of this imports the product's
occurrence, decision or verify code (the import audit's `independent-checker` rule).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from probes import fetch, ql3_executable
from ql3_cluster_postgres import VerifyReport

if TYPE_CHECKING:
    from collections.abc import Callable

    from bounds import Bound
    from ql3_testkit import OracleVerdict


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

    def record(self, outcome: Outcome) -> None:
        """Copy the measured figures of `outcome` into this row."""
        self.expected = outcome.expected
        self.admitted = outcome.admitted
        self.duplicated = outcome.duplicated
        self.early = outcome.early
        self.missing = outcome.missing
        self.retries_40001 = outcome.retries_40001
        self.max_lateness_ms = outcome.max_lateness_ms


EVIDENCE: list[Evidence] = []


@dataclass
class History:
    """What the database holds once the replicas stopped, compared with the expectation.

    `seen` counts admissions per (schedule, occurrence) of the schedules in scope; the row
    counts (`runs`, `attempts`, `events`, `claims` held) cover the whole database.
    """

    want: set[tuple[int, int]]
    seen: dict[tuple[int, int], int]
    duplicated: int
    early: int
    lateness_ms: int
    runs: int
    attempts: int
    events: int
    claims: int
    latest: str | None = None

    @property
    def missing(self) -> set[tuple[int, int]]:
        """Expected occurrences never admitted."""
        return self.want - set(self.seen)

    @property
    def unexpected(self) -> set[tuple[int, int]]:
        """Admissions nobody expected."""
        return set(self.seen) - self.want


def read_history(dsn: str, scope: list[int], want: set[tuple[int, int]]) -> History:
    """Read the cron runs of `scope` and the row and claim counts of the whole database.

    Manual Runs ("trigger now") are no occurrences: they are left out of what is judged against
    the expected occurrences, and counted with the rest of the rows (their attempts and events
    are rows too).
    """
    rows = fetch(
        dsn,
        "SELECT schedule_id, scheduled_for_ms, created_at_ms, owner_id FROM ql3.runs"
        " WHERE kind = 'cron' ORDER BY id",
    )
    runs = [row[:3] for row in rows if row[0] in scope]
    latest = None
    if rows:
        late = max(rows, key=lambda row: row[2] - row[1])
        latest = (
            f"latest admission: schedule {late[0]} occurrence {late[1]} by {late[3]},"
            f" {late[2] - late[1]} ms late"
        )
    seen: dict[tuple[int, int], int] = {}
    for schedule_id, at, _ in runs:
        seen[(schedule_id, at)] = seen.get((schedule_id, at), 0) + 1
    counts = fetch(
        dsn,
        "SELECT (SELECT count(*) FROM ql3.runs), (SELECT count(*) FROM ql3.attempts),"
        " (SELECT count(*) FROM ql3.events),"
        " (SELECT count(*) FROM ql3.trigger_schedules WHERE claim_owner_id IS NOT NULL)",
    )[0]
    runs_n, attempts_n, events_n, claims_n = (int(value) for value in counts)
    return History(
        want=want,
        seen=seen,
        duplicated=sum(count - 1 for count in seen.values()),
        early=sum(1 for _, at, created in runs if created < at),
        lateness_ms=int(max((created - at for _, at, created in runs), default=0)),
        runs=runs_n,
        attempts=attempts_n,
        events=events_n,
        claims=claims_n,
        latest=latest,
    )


def assert_clean(
    history: History,
    outcome: Outcome,
    *,
    executed: bool,
    bound: Bound | None,
    logs: Callable[[], str],
) -> None:
    """Fail on any finding of either judge, any wrong admission, odd row counts or a late one.

    With `executed`, workers ran the attempts: a run may have several attempts and their events,
    so rows are only required to be at least 1:1:2.
    """
    oracle, report = outcome.oracle, outcome.report
    assert oracle.ok, "the oracle found violations:\n" + "\n".join(oracle.lines())
    assert report.ok, "ql3 verify found violations:\n" + "\n".join(report.lines())
    assert history.duplicated == 0, f"{history.duplicated} duplicate admissions"
    assert history.early == 0, f"{history.early} early admissions"
    missing, unexpected = history.missing, history.unexpected
    assert not missing, f"{len(missing)} expected occurrences missing: {sorted(missing)[:10]}"
    assert not unexpected, f"{len(unexpected)} unexpected admissions: {sorted(unexpected)[:10]}"
    runs_n, attempts_n, events_n = history.runs, history.attempts, history.events
    at_admission = (attempts_n, events_n) == (runs_n, 2 * runs_n)
    if executed:
        at_admission = attempts_n >= runs_n and events_n >= 2 * runs_n
    assert at_admission, (
        f"rows are not 1:1:2: runs={runs_n} attempts={attempts_n} events={events_n}"
    )
    assert history.claims == 0, f"{history.claims} claims left at rest after a graceful stop"
    if bound is not None:
        assert history.lateness_ms <= bound.ms, (
            f"an occurrence was admitted {history.lateness_ms} ms late, bound {bound}\n{logs()}"
        )
