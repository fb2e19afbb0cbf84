"""History checks read back from the database: exactly once, none early, 1:1:2, no claim at rest."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from fix_db import sql_rows
from ql3_cluster_postgres import ScheduleAdmin
from ql3_runtime_core import ScheduleDefinition, next_occurrence_ms

EVERY_SECOND = "* * * * * *"


def add_schedules(
    admin_dsn: str, count: int, *, prefix: str = "s", cron: str = EVERY_SECOND
) -> dict[int, int]:
    """Create `count` schedules; returns schedule id -> first cursor (database time)."""
    created: dict[int, int] = {}
    with ScheduleAdmin(admin_dsn) as admin:
        for index in range(count):
            record = admin.add_schedule(f"{prefix}-{index}", ScheduleDefinition(cron=cron))
            assert record.next_due_at_ms is not None
            created[record.schedule_id] = record.next_due_at_ms
    return created


_PLANT = """
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
task AS (
    INSERT INTO ql3.tasks (name, created_at_ms) SELECT %(name)s, now_ms FROM obs RETURNING id
),
trig AS (
    INSERT INTO ql3.triggers (task_id, created_at_ms)
    SELECT task.id, obs.now_ms FROM task, obs RETURNING id, task_id
)
INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron, timezone, next_due_at_ms,
                                   updated_at_ms, created_at_ms)
SELECT trig.id, trig.task_id, %(cron)s, %(timezone)s, obs.now_ms, obs.now_ms, obs.now_ms
FROM trig, obs
RETURNING id
"""


def plant_schedule(superuser_dsn: str, name: str, *, cron: str, timezone: str = "UTC") -> int:
    """Write a due schedule by SQL as the superuser, past every application check; its id."""
    rows = sql_rows(superuser_dsn, _PLANT, {"name": name, "cron": cron, "timezone": timezone})
    return int(rows[0][0])


def expected_occurrences(
    first: dict[int, int], end_ms: int, cron: str = EVERY_SECOND
) -> set[tuple[int, int]]:
    """Every occurrence of each schedule from its first cursor up to `end_ms` inclusive."""
    expected = set()
    for schedule_id, start in first.items():
        occurrence = start
        while occurrence <= end_ms:
            expected.add((schedule_id, occurrence))
            occurrence = next_occurrence_ms(cron, "UTC", occurrence)
    return expected


@dataclass(frozen=True)
class History:
    """What the database holds for some schedules."""

    runs: list[
        tuple[int, int, int, str, int, int]
    ]  # schedule, for, created, owner, attempts, events
    claims_at_rest: int

    @property
    def keys(self) -> list[tuple[int, int]]:
        """(schedule, occurrence) of every run."""
        return [(row[0], row[1]) for row in self.runs]

    def by_owner(self) -> Counter[str]:
        """Count runs admitted per owner id."""
        return Counter(row[3] for row in self.runs)


def read_history(superuser_dsn: str, schedule_ids: list[int], kind: str = "cron") -> History:
    """Read runs of `kind` (with attempt/event counts) and claims still held for the schedules.

    Cron runs by default: the occurrences. Manual Runs (`ql3 schedule trigger`) are no
    occurrences and are read only when asked for (`kind="manual"`).
    """
    runs = sql_rows(
        superuser_dsn,
        "SELECT r.schedule_id, r.scheduled_for_ms, r.created_at_ms, r.owner_id,"
        " (SELECT count(*) FROM ql3.attempts a WHERE a.run_id = r.id),"
        " (SELECT count(*) FROM ql3.events e WHERE e.run_id = r.id)"
        " FROM ql3.runs r WHERE r.schedule_id = ANY(%s) AND r.kind = %s ORDER BY 1, 2",
        [schedule_ids, kind],
    )
    at_rest = sql_rows(
        superuser_dsn,
        "SELECT count(*) FROM ql3.trigger_schedules WHERE id = ANY(%s) AND claim_token IS NOT NULL",
        [schedule_ids],
    )[0][0]
    return History(runs=[tuple(row) for row in runs], claims_at_rest=int(at_rest))


def assert_exact_history(superuser_dsn: str, first: dict[int, int], end_ms: int) -> History:
    """Every expected occurrence up to `end_ms` exactly once, none early, 1:1:2, no claim left."""
    history = read_history(superuser_dsn, list(first))
    keys = history.keys
    duplicates = [key for key, count in Counter(keys).items() if count > 1]
    assert duplicates == [], f"duplicates: {duplicates[:5]}"
    early = [row for row in history.runs if row[2] < row[1]]
    assert early == [], f"early admissions: {early[:5]}"
    expected = expected_occurrences(first, end_ms)
    missing = sorted(expected - set(keys))
    assert missing == [], f"{len(missing)} missing, e.g. {missing[:5]}"
    judged = {key for key in keys if key[1] <= end_ms}
    assert judged == expected, f"unexpected: {sorted(judged - expected)[:5]}"
    assert all(row[4] == 1 and row[5] == 2 for row in history.runs), (
        "not 1 run : 1 attempt : 2 events"
    )
    assert history.claims_at_rest == 0, f"{history.claims_at_rest} claims left at rest"
    return history
