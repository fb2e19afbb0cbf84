"""verify_history's misfire accounting: each occurrence the cursor passed is a run or a skip record.

Under catch_up a gap is `missing`; under skip and fire_once a gap is accounted for only by a skip
record that is exactly the range a claim missed (`skip_record` otherwise). The histories are
written row by row by `written_history.History`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from written_history import SECOND, clean_schedule, whole_second

if TYPE_CHECKING:
    from written_history import History


def test_catch_up_gap_is_missing(history: History) -> None:
    """Under catch_up every occurrence the cursor passed needs a run: a gap is `missing`."""
    schedule, first, _ = clean_schedule(history)
    history.forget_run(schedule, first + 2 * SECOND)
    report = history.verify()
    assert report.count("missing") == 1, report.lines()
    assert (report.expected, report.admitted, report.missing) == (5, 4, 1)


def test_skip_policy_gap_needs_a_skip_record(history: History) -> None:
    """Under skip a gap is accounted for only by a skip record of missed occurrences."""
    now = history.now_ms()
    created = whole_second(now) - 40 * SECOND + 500
    first = whole_second(created) + SECOND
    recorded = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 11 * SECOND, policy="skip", grace_ms=2_000
    )
    # A claim at first+10.5 s missed first..first+8 s (more than 2 s late) and admitted first+9 s
    # and first+10 s on time.
    history.skip(recorded, first, first + 8 * SECOND, 9, acquired_at_ms=first + 10_500)
    history.run(recorded, first + 9 * SECOND, first + 10_510)
    history.run(recorded, first + 10 * SECOND, first + 10_510)
    bare = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 11 * SECOND, policy="skip", grace_ms=2_000
    )
    history.run(bare, first + 9 * SECOND, first + 10_510)
    history.run(bare, first + 10 * SECOND, first + 10_510)
    report = history.verify()
    assert report.count("missing") == 1, report.lines()
    # The gap opens the bare schedule's history: no checkpoint covers it either (`checkpoint`).
    assert {v.schedule_id for v in report.violations} == {bare[0]}
    assert set(report.violation_counts) == {"missing", "checkpoint"}
    verdicts = {verdict.schedule_id: verdict for verdict in report.per_schedule}
    assert (verdicts[recorded[0]].skipped, verdicts[recorded[0]].expected) == (9, 2)
    assert (verdicts[bare[0]].missing, verdicts[bare[0]].expected) == (9, 11)


def test_fire_once_must_admit_the_occurrence_after_its_skip_record(history: History) -> None:
    """Under fire_once the occurrence right after a skip record must have a run."""
    now = history.now_ms()
    created = whole_second(now) - 40 * SECOND + 500
    first = whole_second(created) + SECOND
    good = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 6 * SECOND, policy="fire_once", grace_ms=0
    )
    history.skip(
        good, first, first + 4 * SECOND, 5, acquired_at_ms=first + 5_500, policy="fire_once"
    )
    history.run(good, first + 5 * SECOND, first + 5_510)
    bad = history.schedule(
        created_at_ms=created, next_due_at_ms=first + 6 * SECOND, policy="fire_once", grace_ms=0
    )
    history.skip(
        bad, first, first + 3 * SECOND, 4, acquired_at_ms=first + 5_500, policy="fire_once"
    )
    history.run(bad, first + 5 * SECOND, first + 5_510)
    report = history.verify()
    assert {v.schedule_id for v in report.violations} == {bad[0]}, report.lines()
    assert report.count("skip_record") == 1
    assert report.count("missing") == 1


@pytest.mark.parametrize(
    ("first", "last", "count", "acquired", "policy", "problem"),
    [
        (0, 4, 4, 5_500, "skip", "counts 4 occurrences, its range holds 5"),
        (0, 4, 5, 5_500, "fire_once", "records policy 'fire_once'"),
        (0, 4, 5, 4_400, "skip", "on time at the claim"),
        (0, 3, 4, 5_500, "skip", "which that claim had missed too"),
    ],
    ids=["wrong-count", "other-policy", "on-time", "stops-early"],
)
def test_inconsistent_skip_record_is_caught(
    history: History,
    *,
    first: int,
    last: int,
    count: int,
    acquired: int,
    policy: str,
    problem: str,
) -> None:
    """A skip record that is not the exact range of missed occurrences is `skip_record`."""
    now = history.now_ms()
    created = whole_second(now) - 40 * SECOND + 500
    start = whole_second(created) + SECOND
    schedule = history.schedule(
        created_at_ms=created, next_due_at_ms=start + 6 * SECOND, policy="skip", grace_ms=500
    )
    history.skip(
        schedule,
        start + first * SECOND,
        start + last * SECOND,
        count,
        acquired_at_ms=start + acquired,
        policy=policy,
    )
    for at in range(last + 1, 6):
        history.run(schedule, start + at * SECOND, start + max(acquired, at * SECOND) + 5)
    report = history.verify()
    assert report.count("skip_record") >= 1, report.lines()
    assert any(problem in line for line in report.lines()), report.lines()


def test_run_inside_a_skip_record_is_caught(history: History) -> None:
    """An occurrence both skipped and admitted is accounted for twice: `skip_record`."""
    schedule, first, _ = clean_schedule(history)
    history.conn.execute("UPDATE ql3.schedule_revisions SET misfire_policy = 'skip'")
    history.conn.execute("UPDATE ql3.trigger_schedules SET misfire_policy = 'skip'")
    history.skip(schedule, first, first + SECOND, 2, acquired_at_ms=first + 4_000)
    report = history.verify()
    assert report.count("skip_record") >= 1, report.lines()
    assert any("overlaps" in line for line in report.lines()), report.lines()
