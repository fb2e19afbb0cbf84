"""`ql3 verify` beside backfilled Runs: a superseded skip record and its Run, one occurrence once.

A real history is written through the production paths: two `skip` schedules whose first claim
came late (the repository's commit writes a misfire skip record for each), then
`ScheduleAdmin.backfill` admits the skipped occurrences of one, and those before its creation.
Verify and the test kit's oracle find it clean, with the accounting exact. Defects are planted in
copies of that database as the schema owner; the unmodified copy is the clean control.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planted import copy_of
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin, verify_history
from ql3_runtime_core import CommitStatus, MisfirePolicy, TaskExecution
from ql3_testkit import oracle_verdict
from repo_helpers import command, decide, fetch, make_schedules, owner_conn

if TYPE_CHECKING:
    from collections.abc import Callable

    from ql3_testkit import Ql3Database

__all__ = ["copy_of"]  # the fixture, imported so that pytest finds it here

SHELL = TaskExecution(command="true", max_attempts=2, timeout_ms=60_000, retry_backoff_ms=1_000)
BEFORE = 3  # occurrences before the first cursor that the backfill asks for


def _history(db: Ql3Database) -> tuple[int, int, int]:
    """Write the history; (backfilled schedule, the other one, skipped occurrences of the first)."""
    filled, other = make_schedules(
        db, 2, prefix="bv", policy=MisfirePolicy.SKIP, grace_ms=0, shift_back_ms=8_000,
        execution=SHELL,
    )  # fmt: skip
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claims = repo.claim_due_schedules(command(), 4)
        batch = repo.commit_decisions([decide(claim) for claim in claims])
    assert all(o.status is CommitStatus.COMMITTED for o in batch.outcomes)
    ((first, last, count, first_cursor),) = fetch(
        db.dsn("owner"),
        "SELECT k.first_skipped_ms, k.last_skipped_ms, k.skipped_count, v.first_cursor_ms"
        " FROM ql3.skipped_occurrences AS k JOIN ql3.schedule_revisions AS v"
        " ON v.schedule_id = k.schedule_id WHERE k.schedule_id = %s",
        (filled,),
    )
    with ScheduleAdmin(db.dsn("admin")) as admin:
        report = admin.backfill(
            "bv00000",
            first_cursor - BEFORE * 1_000,
            last,
            request_id="verify-me",
            include_before_creation=True,
            batch_size=4,
        )
    assert (report.admitted, report.already_run) == (count + BEFORE, 0)
    assert first == first_cursor
    return filled, other, count


def test_a_backfilled_history_is_clean_and_accounted_exactly(ql3_db: Ql3Database) -> None:
    """Every skipped occurrence still skipped in the accounting, its Run judged by `backfill`."""
    filled, _, count = _history(ql3_db)
    report = verify_history(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    verdicts = {verdict.schedule_id: verdict for verdict in report.per_schedule}
    mine = verdicts[filled]
    assert (mine.skipped, mine.missing, mine.duplicated, mine.admitted) == (count, 0, 0, 0)
    assert report.runs == 0  # cron runs: the backfilled ones fill occurrences apart
    oracle = oracle_verdict(ql3_db.dsn("admin"))
    assert oracle.ok, oracle.findings


def _planted(copy: Ql3Database, *statements: tuple[str, tuple[Any, ...]]) -> Any:
    with owner_conn(copy) as owner:
        for statement, params in statements:
            assert owner.execute(statement, params).rowcount != 0, statement
    return verify_history(copy.dsn("admin"))


def _oracle_kinds(
    copy_of: Callable[[Ql3Database], Ql3Database], db: Ql3Database, run_id: int
) -> set[str]:
    """Plant the unlinked Run again in a fresh copy; what the test kit's oracle finds there."""
    copy = copy_of(db)
    with owner_conn(copy) as owner:
        owner.execute("UPDATE ql3.runs SET supersedes_skip_id = NULL WHERE id = %s", (run_id,))
    return set(oracle_verdict(copy.dsn("admin")).kinds())


def test_planted_backfill_defects_are_reported(
    ql3_db: Ql3Database, copy_of: Callable[[Ql3Database], Ql3Database]
) -> None:
    """Each defect is reported by `backfill` (and what else it breaks); the clean copy passes."""
    _, other, _ = _history(ql3_db)
    clean = verify_history(copy_of(ql3_db).dsn("admin"))
    assert clean.ok, clean.lines()
    ((linked, unlinked_run, skip_id, other_skip),) = fetch(
        ql3_db.dsn("owner"),
        "SELECT min(r.id) FILTER (WHERE r.supersedes_skip_id IS NOT NULL),"
        " min(r.id) FILTER (WHERE r.supersedes_skip_id IS NULL), min(r.supersedes_skip_id),"
        " (SELECT k.id FROM ql3.skipped_occurrences AS k WHERE k.schedule_id = %s)"
        " FROM ql3.runs AS r WHERE r.kind = 'backfill'",
        (other,),
    )

    # A backfilled Run with neither a skip record nor a before-creation request behind it.
    unlinked = _planted(
        copy_of(ql3_db),
        ("UPDATE ql3.runs SET supersedes_skip_id = NULL WHERE id = %s", (linked,)),
    )
    assert set(unlinked.violation_counts) == {"backfill"}, unlinked.lines()
    assert "supersedes no skip record" in unlinked.violations[0].detail
    assert _oracle_kinds(copy_of, ql3_db, linked) == {"backfill"}

    # Two Runs for one occurrence: a cron Run beside the backfilled one (the key dropped).
    doubled = _planted(
        copy_of(ql3_db),
        ("ALTER TABLE ql3.runs DROP CONSTRAINT runs_occurrence_unique", ()),
        (
            (
                "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
                " claim_token, created_at_ms) SELECT r.schedule_id, r.task_id,"
                " r.scheduled_for_ms, 'planted', gen_random_uuid(), r.created_at_ms"
                " FROM ql3.runs AS r WHERE r.id = %s"
            ),
            (linked,),
        ),
    )
    assert doubled.violation_counts.get("backfill") == 1, doubled.lines()
    assert any("shares its occurrence" in v.detail for v in doubled.violations)

    # The link names a record that does not cover the occurrence: the before-creation Run
    # pointed at the schedule's skip record, and another Run at the other schedule's record.
    miscovered = _planted(
        copy_of(ql3_db),
        ("UPDATE ql3.runs SET supersedes_skip_id = %s WHERE id = %s", (skip_id, unlinked_run)),
        ("UPDATE ql3.runs SET supersedes_skip_id = %s WHERE id = %s", (other_skip, linked)),
    )
    assert miscovered.violation_counts == {"backfill": 2}, miscovered.lines()
    details = " ".join(v.detail for v in miscovered.violations)
    assert "does not cover its occurrence" in details
    assert "not of its schedule" in details

    # A backfilled Run off the cron (half a second late), inside its record's range.
    off_cron = _planted(
        copy_of(ql3_db),
        ("UPDATE ql3.runs SET scheduled_for_ms = scheduled_for_ms + 500 WHERE id = %s", (linked,)),
    )
    assert set(off_cron.violation_counts) == {"backfill"}, off_cron.lines()
    assert "is not an occurrence" in off_cron.violations[0].detail

    # The superseded record removed: its Runs stand alone and its occurrences are missing.
    unrecorded = _planted(
        copy_of(ql3_db), ("DELETE FROM ql3.skipped_occurrences WHERE id = %s", (skip_id,))
    )
    assert {"backfill", "missing"} <= set(unrecorded.violation_counts), unrecorded.lines()
