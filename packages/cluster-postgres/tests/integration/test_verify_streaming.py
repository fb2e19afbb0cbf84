"""verify_history streams: same verdicts as the in-memory checker, bounded findings.

Random histories, written as the superuser in a few statements, hold a sprinkling of every fault
the rules look for (lost runs, off-cron runs, duplicates, early and mistimed runs, runs out of
order, skip records right and wrong, bad shapes, orphans, runs outside every revision) across
crons, zones, policies and revisions, with schedules long enough to span several batches of the
server-side cursors. `checked_verify` requires the streaming checker and the reference to agree
on each, with and without `since_ms`.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg.rows import dict_row, scalar_row
from ql3_cluster_postgres import VIOLATIONS_PER_RULE_MAX, verify_history
from ql3_runtime_core import occurrences_after_ms
from verify_compare import checked_verify
from verify_reference import reference_verdict

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

# (cron, zone, policy, occurrences): the third runs past one cursor batch (20 000 rows).
SCHEDULES = (
    ("* * * * * *", "UTC", "catch_up", 3_000),
    ("*/3 * * * * *", "America/New_York", "fire_once", 2_000),
    ("* * * * * *", "Europe/Paris", "catch_up", 21_500),
    ("7,19,41 * * * * *", "Europe/Paris", "skip", 1_500),
    ("*/2 * * * * *", "UTC", "fire_once", 2_500),
)
GRACE_MS = 1_000


@dataclass
class Run:
    """One run to write, with the attempts and events its admission left."""

    schedule_id: int
    task_id: int
    at_ms: int
    created_ms: int
    token: uuid.UUID = field(default_factory=uuid.uuid4)
    attempts: list[tuple[int, int]] = field(default_factory=list)  # (number, created)
    events: list[tuple[str, int]] = field(default_factory=list)  # (kind, created)

    def well_formed(self) -> Run:
        """Give the run the admission shape: one attempt and two events at its commit time."""
        self.attempts = [(1, self.created_ms)]
        self.events = [("run.admitted", self.created_ms), ("attempt.queued", self.created_ms)]
        return self


@dataclass
class Writer:
    """Collects a random history and writes it in a few statements."""

    conn: psycopg.Connection[Any]
    rng: random.Random
    broken: bool  # UNIQUE and the not-early CHECK dropped: duplicates and early runs possible
    runs: list[Run] = field(default_factory=list)
    skips: list[tuple[int, int, int, int, str, int]] = field(default_factory=list)

    def chance(self, per_thousand: float) -> bool:
        """Draw: True with probability per_thousand / 1000."""
        return self.rng.random() * 1000 < per_thousand

    def schedule(self, index: int, spec: tuple[str, str, str, int], now_ms: int) -> None:
        """Write one schedule, its revisions, and plan its runs and skip records."""
        cron, zone, policy, count = spec
        # Far enough back for the sparsest cron (3 a minute): every occurrence is past.
        stream = occurrences_after_ms(cron, zone, now_ms - count * 30_000 - 600_000)
        occurrences = [next(stream) for _ in range(count)]
        first, cursor = occurrences[0], next(stream)
        created = first - 600
        row = (
            self.conn.cursor(row_factory=dict_row)
            .execute(
                "WITH t AS (INSERT INTO ql3.tasks (name, created_at_ms) VALUES (%s, %s)"
                " RETURNING id), g AS (INSERT INTO ql3.triggers (task_id, created_at_ms)"
                " SELECT id, %s FROM t RETURNING id, task_id)"
                " INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, timezone,"
                " misfire_policy, misfire_grace_ms, next_due_at_ms, updated_at_ms, created_at_ms)"
                " SELECT g.id, g.task_id, %s, %s, %s, %s, %s, %s, %s FROM g RETURNING id, task_id",
                (
                    f"s{index}",
                    created,
                    created,
                    cron,
                    zone,
                    policy,
                    GRACE_MS,
                    cursor,
                    now_ms,
                    created,
                ),
            )
            .fetchone()
        )
        assert row is not None
        schedule_id, task_id = int(row["id"]), int(row["task_id"])
        self._revisions(
            schedule_id,
            cron=cron,
            zone=zone,
            policy=policy,
            occurrences=occurrences,
            created=created,
        )
        self._runs(schedule_id, task_id, policy, occurrences)
        if self.chance(300):  # a run before the first cursor: outside every revision
            early = Run(schedule_id, task_id, first - 60_000, first - 59_990)
            self.runs.append(early.well_formed())

    def _revisions(
        self,
        schedule_id: int,
        *,
        cron: str,
        zone: str,
        policy: str,
        occurrences: list[int],
        created: int,
    ) -> None:
        """Revision 1, and on some schedules a revision 2 from the middle (grace changed back)."""
        middle = occurrences[len(occurrences) // 2]
        split = self.chance(500)
        insert = (
            "INSERT INTO ql3.schedule_revisions (schedule_id, revision, reason, cron, timezone,"
            " misfire_policy, misfire_grace_ms, first_cursor_ms, end_cursor_ms, placed_after_ms,"
            " created_at_ms, ended_at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        )
        definition = (cron, zone, policy, GRACE_MS)
        end_cursor, ended = (middle, middle - 500) if split else (None, None)
        self.conn.execute(
            insert,
            (
                *(schedule_id, 1, "created", *definition, occurrences[0], end_cursor),
                *(created - 100, created, ended),
            ),
        )
        if split:
            self.conn.execute(
                insert,
                (schedule_id, 2, "redefined", *definition, middle, None, None, middle - 500, None),
            )

    def _runs(self, schedule_id: int, task_id: int, policy: str, occurrences: list[int]) -> None:
        """Plan one run per occurrence, with faults, and the skip records of gaps."""
        index = 0
        while index < len(occurrences):
            at = occurrences[index]
            if policy != "catch_up" and index + 5 < len(occurrences) and self.chance(4):
                index = self._gap(
                    schedule_id, task_id, policy, occurrences=occurrences, index=index
                )
                continue
            index += 1
            if self.chance(3):
                continue  # lost
            run = Run(schedule_id, task_id, at, at + 5 + self.rng.randrange(40))
            if self.chance(2):
                run.at_ms -= 250  # off the cron (still committed after it)
            if self.chance(2):
                run.created_ms += 5_000  # the next runs commit before it: time backwards
            if self.broken and self.chance(2):
                run.created_ms = at - 100  # early
            self.runs.append(self._shaped(run))
            if self.broken and self.chance(2):
                self.runs.append(Run(schedule_id, task_id, at, run.created_ms + 3).well_formed())
            if self.chance(2) and len(self.runs) > 1:  # committed in the wrong order
                self.runs[-1], self.runs[-2] = self.runs[-2], self.runs[-1]

    def _gap(
        self, schedule_id: int, task_id: int, policy: str, *, occurrences: list[int], index: int
    ) -> int:
        """Skip 1..4 occurrences with a skip record (sometimes a wrong one); return the next."""
        skipped = self.rng.randrange(1, 5)
        first, last = occurrences[index], occurrences[index + skipped - 1]
        following = occurrences[index + skipped]
        # Sometimes the claim came late for the following occurrence too: skip had to skip it.
        claim = following + (1_500 if self.chance(100) else 300)
        # A wrong count (the CHECK only ties a count of 1 to a one-occurrence range).
        count = skipped + (1 if skipped > 1 and self.chance(100) else 0)
        self.skips.append((schedule_id, first, last, count, policy, claim))
        if not self.chance(100):  # else fire_once's following occurrence has no run
            self.runs.append(Run(schedule_id, task_id, following, claim + 5).well_formed())
        return index + skipped + 1

    def _shaped(self, run: Run) -> Run:
        run.well_formed()
        if self.chance(2):
            run.events.pop()  # attempt.queued lost
        if self.chance(2):
            run.attempts[0] = (2, run.created_ms)  # its only attempt is not number 1
        if self.chance(2):
            run.attempts[0] = (1, run.created_ms - 1)  # attempt not at the commit time
        return run

    def write(self) -> None:
        """Write the runs in the planned order (ids follow it), their rows, skips, orphans."""
        self.conn.execute(
            "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
            " created_at_ms) SELECT s, t, a, 'test', k, c FROM unnest(%s::bigint[], %s::bigint[],"
            " %s::bigint[], %s::uuid[], %s::bigint[]) WITH ORDINALITY AS u (s, t, a, k, c, n)"
            " ORDER BY n",
            (
                [r.schedule_id for r in self.runs],
                [r.task_id for r in self.runs],
                [r.at_ms for r in self.runs],
                [r.token for r in self.runs],
                [r.created_ms for r in self.runs],
            ),
        )
        attempts = [(r.token, n, c) for r in self.runs for n, c in r.attempts]
        self.conn.execute(
            "INSERT INTO ql3.attempts (run_id, attempt_number, created_at_ms, updated_at_ms)"
            " SELECT r.id, u.n, u.c, u.c FROM unnest(%s::uuid[], %s::int[], %s::bigint[])"
            " AS u (k, n, c) JOIN ql3.runs AS r ON r.claim_token = u.k",
            ([a[0] for a in attempts], [a[1] for a in attempts], [a[2] for a in attempts]),
        )
        events = [(r.token, kind, c) for r in self.runs for kind, c in r.events]
        self.conn.execute(
            # attempt.queued names the run's attempt, as an admission writes it.
            "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
            " SELECT r.id, CASE WHEN u.kind = 'attempt.queued' THEN a.id END, u.kind, u.c"
            " FROM unnest(%s::uuid[], %s::text[], %s::bigint[]) AS u (k, kind, c)"
            " JOIN ql3.runs AS r ON r.claim_token = u.k"
            " LEFT JOIN ql3.attempts AS a ON a.run_id = r.id",
            ([e[0] for e in events], [e[1] for e in events], [e[2] for e in events]),
        )
        for schedule_id, first, last, count, policy, claim in self.skips:
            self.conn.execute(
                "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms,"
                " last_skipped_ms, skipped_count, misfire_policy, claim_acquired_at_ms, owner_id,"
                " claim_token, created_at_ms) VALUES (%s, %s, %s, %s, %s, %s, 'test', %s, %s)",
                (schedule_id, first, last, count, policy, claim, uuid.uuid4(), claim + 5),
            )
        if self.chance(500):
            self.conn.execute(
                "INSERT INTO ql3.events (run_id, kind, created_at_ms)"
                " VALUES (999999999, 'run.admitted', 1)"
            )


@pytest.fixture
def superuser(ql3_db: Ql3Database) -> Iterator[psycopg.Connection[Any]]:
    """Give an autocommit superuser connection to a fresh QL3 database."""
    with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as conn:
        yield conn


def _write_history(conn: psycopg.Connection[Any], seed: int) -> list[int]:
    """Write a random history (seeded); return the occurrences where `since_ms` may cut it."""
    writer = Writer(conn, random.Random(seed), broken=seed % 2 == 0)  # noqa: S311 - not secret
    if writer.broken:
        conn.execute(
            "ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique,"
            " DROP CONSTRAINT runs_not_early"
        )
        conn.execute("CREATE INDEX runs_occurrence ON ql3.runs (schedule_id, scheduled_for_ms)")
    now = (
        conn.cursor(row_factory=scalar_row)
        .execute("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms")
        .fetchone()
    )
    assert now is not None
    for index, spec in enumerate(SCHEDULES):
        writer.schedule(index, spec, now)
    writer.write()
    conn.execute("VACUUM (ANALYZE) ql3.runs")
    cuts = sorted({run.at_ms for run in writer.runs})
    return [cuts[len(cuts) // 3], *(skip[1] + 1 for skip in writer.skips[:1])]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_history_gets_the_reference_verdict(
    ql3_db: Ql3Database, superuser: psycopg.Connection[Any], seed: int
) -> None:
    """On a random faulty history, streaming and in-memory checkers find exactly the same."""
    cuts = _write_history(superuser, seed)
    report = checked_verify(ql3_db.dsn("admin"), stale_claim_grace_ms=0)
    planted = {"missing", "not_occurrence", "order", "shape", "skip_record", "time_backwards"}
    if seed % 2 == 0:
        planted |= {"duplicate", "early"}
    assert planted <= set(report.violation_counts), report.violation_counts
    assert report.runs > 20_000
    for since_ms in cuts:  # a third of the way in; inside a skip record
        checked_verify(ql3_db.dsn("admin"), since_ms=since_ms, stale_claim_grace_ms=0)


def test_findings_are_capped_per_rule_and_all_counted(
    ql3_db: Ql3Database, superuser: psycopg.Connection[Any]
) -> None:
    """With a cap of 2, each rule lists at most 2 findings, counts all, and says how many more."""
    _write_history(superuser, 2)
    reference = Counter(v.rule for v in reference_verdict(ql3_db.dsn("admin")).violations)
    report = verify_history(ql3_db.dsn("admin"), violations_per_rule=2)
    # The reference has no `attempts` rule (see verify_compare); the planted shape faults break it
    # too, and it is capped like the others.
    attempts = report.violation_counts.get("attempts", 0)
    assert {r: c for r, c in report.violation_counts.items() if r != "attempts"} == dict(reference)
    assert attempts > 2
    reference["attempts"] = attempts
    listed = Counter(v.rule for v in report.violations)
    assert listed == {rule: min(count, 2) for rule, count in reference.items()}
    crowded = [rule for rule, count in reference.items() if count > 2]
    assert crowded, reference
    for rule in crowded:
        assert report.count(rule) == reference[rule]
        assert report.unlisted(rule) == reference[rule] - 2
        assert f"{rule}: {reference[rule] - 2} more not listed (the first 2 are)" in report.lines()


@pytest.mark.parametrize("per_rule", [0, VIOLATIONS_PER_RULE_MAX + 1])
def test_cap_outside_its_bounds_is_refused(ql3_db: Ql3Database, per_rule: int) -> None:
    """A cap below 1 or above VIOLATIONS_PER_RULE_MAX is a ValueError naming the argument."""
    with pytest.raises(ValueError, match="violations_per_rule"):
        verify_history(ql3_db.dsn("admin"), violations_per_rule=per_rule)
