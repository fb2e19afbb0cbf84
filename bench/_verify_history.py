"""The synthetic history the verify benchmark judges: built in SQL, then planted with defects.

One `Plan` per schedule says where its occurrences fall (per-second or every-2-second crons in UTC
and Europe/Paris), when each run committed, and, on every third schedule, where the second
revision's gap of `GAP` occurrences lies. `create_schedules` writes schedules, revisions, skip
records and runs with INSERT ... SELECT generate_series (`sql/verify_build_*.sql`, `CHUNK_ROWS`
per statement, each one durable commit); `plant` then breaks the history in exactly the ways
`PLANTED` lists (see `_verify`'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._sql import load_sql

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg


__all__ = ["PLANTED", "Plan", "create_schedules", "plan_history", "plant", "schedule_ids"]

# Rows per INSERT of the build (each statement one durable commit).
CHUNK_ROWS = 500_000
GAP = 10
LATE_CLAIM_MS = 300
END_BEFORE_NOW_MS = 120_000
# What the violated history must report, rule by rule (see the module docstring).
PLANTED = {"duplicate": 1, "early": 1, "missing": 2, "not_occurrence": 1, "shape": 1}


@dataclass(frozen=True)
class Plan:
    """One synthetic schedule: occurrence k is `first_ms + k * step_ms`, k < occurrences."""

    index: int
    cron: str
    timezone: str
    step_ms: int
    first_ms: int
    occurrences: int
    redefined: bool

    @property
    def name(self) -> str:
        return f"verify-{self.index:06d}"

    @property
    def mid_ms(self) -> int:
        """Where the second revision (if any) starts: the cursor the admin kept."""
        return self.at(self.occurrences // 2)

    @property
    def gap_index(self) -> int | None:
        """First skipped occurrence (redefined schedules only, inside the second revision)."""
        return self.occurrences * 3 // 4 if self.redefined else None

    @property
    def claim_ms(self) -> int | None:
        """When the claim that skipped the gap was taken: just after the occurrence after it."""
        gap = self.gap_index
        return None if gap is None else self.at(gap + GAP) + LATE_CLAIM_MS

    @property
    def cursor_ms(self) -> int:
        return self.at(self.occurrences)

    def at(self, k: int) -> int:
        return self.first_ms + k * self.step_ms

    def committed_ms(self, k: int) -> int:
        """Commit time of occurrence k's run (`verify_build_runs.sql` writes the same)."""
        return self.at(k) + 5 + (k * 7) % 40


def plan_history(schedules: int, occurrences: int, now_ms: int) -> list[Plan]:
    """Return one plan per schedule, the histories ending `END_BEFORE_NOW_MS` before `now_ms`."""
    plans = []
    for index in range(schedules):
        step = 2_000 if index % 4 == 3 else 1_000  # noqa: PLR2004 - every fourth: */2
        end = now_ms - END_BEFORE_NOW_MS
        first = (end - occurrences * step) // step * step
        plans.append(
            Plan(
                index=index,
                cron="*/2 * * * * *" if step == 2_000 else "* * * * * *",  # noqa: PLR2004
                timezone="UTC" if index % 2 == 0 else "Europe/Paris",
                step_ms=step,
                first_ms=first,
                occurrences=occurrences,
                redefined=index % 3 == 0,
            )
        )
    return plans


def create_schedules(conn: psycopg.Connection[dict[str, Any]], plans: Sequence[Plan]) -> None:
    """Write the schedules, their revisions, skip records and runs of `plans` (superuser)."""
    rows = conn.execute(
        load_sql("verify_build_schedules"),
        {
            "names": [p.name for p in plans],
            "crons": [p.cron for p in plans],
            "timezones": [p.timezone for p in plans],
            "policies": ["fire_once" if p.redefined else "catch_up" for p in plans],
            "graces": [1_000 if p.redefined else 60_000 for p in plans],
            "cursors": [p.cursor_ms for p in plans],
            "created": [p.first_ms - 600 for p in plans],
            "updated": [p.committed_ms(p.occurrences - 1) for p in plans],
        },
    ).fetchall()
    ids = [(int(row["schedule_id"]), int(row["task_id"])) for row in rows]
    _write_revisions(conn, plans, [sid for sid, _ in ids])
    _write_skips(conn, plans, [sid for sid, _ in ids])
    _write_runs(conn, plans, ids)


def _write_revisions(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[Plan], ids: Sequence[int]
) -> None:
    """Revision 1 'created' for every schedule; 'redefined' ones get a fire_once revision 2."""
    rows: list[dict[str, Any]] = []
    for plan, sid in zip(plans, ids, strict=True):
        created = plan.first_ms - 600
        first = {
            "schedule_ids": sid,
            "revisions": 1,
            "reasons": "created",
            "crons": plan.cron,
            "timezones": plan.timezone,
            "policies": "catch_up",
            "graces": 60_000,
            "first_cursors": plan.first_ms,
            "end_cursors": None,
            "placed": created - 100,
            "created": created,
            "ended": None,
        }
        rows.append(first)
        if plan.redefined:  # the admin changed the policy at mid_ms - 500, keeping the cursor
            first.update(end_cursors=plan.mid_ms, ended=plan.mid_ms - 500)
            rows.append(
                first
                | {
                    "revisions": 2,
                    "reasons": "redefined",
                    "policies": "fire_once",
                    "graces": 1_000,
                    "first_cursors": plan.mid_ms,
                    "end_cursors": None,
                    "placed": None,
                    "created": plan.mid_ms - 500,
                    "ended": None,
                }
            )
    conn.execute(
        load_sql("verify_build_revisions"), {key: [row[key] for row in rows] for key in rows[0]}
    )


def _write_skips(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[Plan], ids: Sequence[int]
) -> None:
    gapped = [(p, sid) for p, sid in zip(plans, ids, strict=True) if p.gap_index is not None]
    conn.execute(
        load_sql("verify_build_skips"),
        {
            "schedule_ids": [sid for _, sid in gapped],
            "first_ms": [p.at(p.gap_index or 0) for p, _ in gapped],
            "last_ms": [p.at((p.gap_index or 0) + GAP - 1) for p, _ in gapped],
            "skipped": [GAP for _ in gapped],
            "claim_ms": [p.claim_ms for p, _ in gapped],
        },
    )


def _write_runs(
    conn: psycopg.Connection[dict[str, Any]],
    plans: Sequence[Plan],
    ids: Sequence[tuple[int, int]],
) -> None:
    occurrences = max(p.occurrences for p in plans)
    per_chunk = max(1, CHUNK_ROWS // len(plans))
    params: dict[str, Any] = {
        "schedule_ids": [sid for sid, _ in ids],
        "task_ids": [tid for _, tid in ids],
        "first_ms": [p.first_ms for p in plans],
        "step_ms": [p.step_ms for p in plans],
        "occurrences": [p.occurrences for p in plans],
        "gap_index": [p.gap_index for p in plans],
        "gap_count": [GAP if p.redefined else None for p in plans],
        "claim_ms": [p.claim_ms for p in plans],
    }
    for low in range(0, occurrences, per_chunk):
        conn.execute(
            load_sql("verify_build_runs"),
            {**params, "low": low, "high": min(low + per_chunk, occurrences)},
        )


def plant(
    conn: psycopg.Connection[dict[str, Any]], plans: Sequence[Plan], ids: Sequence[int]
) -> None:
    """Break the history in exactly the ways `PLANTED` counts, each on its own schedule."""
    conn.execute(load_sql("verify_plant_unique_dropped"))
    conn.execute(load_sql("verify_plant_plain_index"))
    third = plans[0].occurrences // 3  # before any second revision and gap
    plants = (
        ("verify_plant_missing", 0, third),
        ("verify_plant_duplicate", 1, plans[1].occurrences - 1),
        ("verify_plant_early", 2, third),
        ("verify_plant_shape", 3, third),
        ("verify_plant_off_cron", 4, third),
    )
    for name, index, k in plants:
        conn.execute(load_sql(name), {"schedule_id": ids[index], "at_ms": plans[index].at(k)})


def schedule_ids(conn: psycopg.Connection[dict[str, Any]], plans: Sequence[Plan]) -> list[int]:
    """Return the schedule ids of `plans`, in plan order (the plants address schedules by id)."""
    rows = conn.execute(
        load_sql("verify_schedule_ids"), {"names": [p.name for p in plans]}
    ).fetchall()
    return [int(row["schedule_id"]) for row in rows]
