"""Backfill killed mid-way: a consistent prefix survives, the rerun admits the rest, nothing twice.

One every-second `skip` schedule (grace 2 s) starts MISSED_S behind: its first claim by a real
`ql3 run` replica passes those occurrences into one misfire skip record, then admits the rest of
its short window on time. A real `ql3 schedule backfill` process then admits the skipped
occurrences in small batches (one transaction each) and is SIGKILLed once some, not all, of its
batches have committed (read from the database: the request's batch count). The rerun with the
same request id admits the rest. The skipped occurrences come from cronsim (`expected.py`),
never from QL3's cron engine: each must end with exactly one backfilled Run linked to the skip
record, which stays; the cron series is judged as in every scenario, by the test kit's oracle
and by `ql3 verify`, which must both find the history clean.
"""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from expected import occurrences_between
from harness import SLACK, Bound, wait_until
from probes import ql3_executable
from ql3_runtime_core import MisfirePolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 2_000
WINDOW_S = 6
MISSED_S = 2_400  # the first claim comes 40 minutes late: 2 400 skipped occurrences
BATCH = 20  # 120 batches
KILL_AFTER = 8  # batches committed before the SIGKILL
REQUEST = "chaos-backfill"
GRACE_MS = 2_000
# Only the cron series is judged for lateness (a backfilled Run is late on purpose and no
# lateness rule reads it): the first claim, 40 minutes late, admits what is within the grace;
# after it, every occurrence waits only for a replica's wake-up.
BOUND = Bound.of(("misfire grace, admitted by the first late claim", GRACE_MS), SLACK)
BATCHES_SQL = "SELECT batches, admitted, state FROM ql3.backfills WHERE request_id = %s"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _backfill(run: Scenario, name: str, first: int, last: int) -> list[str]:
    return [
        str(ql3_executable()), "schedule", "backfill", name, "--from", _iso(first),
        "--to", _iso(last), "--batch", str(BATCH), "--request-id", REQUEST,
        "--dsn", run.dsn("admin"),
    ]  # fmt: skip


def _backfilled(run: Scenario) -> list[tuple[int, int | None]]:
    return [
        (int(row[0]), row[1])
        for row in run.fetch_admin(
            "SELECT scheduled_for_ms, supersedes_skip_id FROM ql3.runs WHERE kind = 'backfill'"
            " ORDER BY scheduled_for_ms"
        )
    ]


def test_a_backfill_killed_mid_way_resumes_and_admits_each_occurrence_once(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """SIGKILL between batches leaves a prefix; the rerun completes it; history exact, clean."""
    run = scenario("backfill-crash", "3")
    run.prepare()
    (schedule_id,) = run.add_schedules(
        1, window_s=WINDOW_S, policy=MisfirePolicy.SKIP, grace_ms=GRACE_MS, prefix="fill"
    )
    definition, cursor = run.schedules[schedule_id]
    shift = MISSED_S * 1_000
    # As if created MISSED_S earlier and never decided since (cursor, revision and times alike).
    run.fetch_superuser(
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - %(s)s,"
        " created_at_ms = created_at_ms - %(s)s, updated_at_ms = updated_at_ms - %(s)s"
        " WHERE id = %(id)s RETURNING id",
        {"s": shift, "id": schedule_id},
    )
    run.fetch_superuser(
        "UPDATE ql3.schedule_revisions SET first_cursor_ms = first_cursor_ms - %(s)s,"
        " placed_after_ms = placed_after_ms - %(s)s, created_at_ms = created_at_ms - %(s)s"
        " WHERE schedule_id = %(id)s RETURNING schedule_id",
        {"s": shift, "id": schedule_id},
    )
    first_cursor = cursor - shift
    run.schedules[schedule_id] = (definition, first_cursor)
    run.replica(lease_ms=LEASE_MS)
    run.wait_exhausted(timeout_s=WINDOW_S + 20)
    ((skip_id, skip_first, skip_last, skip_count),) = run.fetch_admin(
        "SELECT id, first_skipped_ms, last_skipped_ms, skipped_count FROM ql3.skipped_occurrences"
    )
    skipped = [skip_first, *occurrences_between(definition.cron, "UTC", skip_first, skip_last)]
    assert len(skipped) == skip_count >= MISSED_S - 2
    name = str(run.fetch_admin("SELECT name FROM ql3.tasks")[0][0])
    batches = -(-len(skipped) // BATCH)

    # The backfill, killed once KILL_AFTER of its batches have committed.
    command = _backfill(run, name, first_cursor, skip_last + 5_000)
    started = time.monotonic()
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as victim:
        try:
            wait_until(
                lambda: any(
                    int(r[0]) >= KILL_AFTER for r in run.fetch_admin(BATCHES_SQL, (REQUEST,))
                ),
                timeout_s=30,
                what=f"{KILL_AFTER} committed batches",
                interval_s=0.002,
            )
            victim.send_signal(signal.SIGKILL)
        finally:
            code = victim.wait(timeout=10)
    assert code == -signal.SIGKILL, f"the backfill was not killed: exit {code}"
    ((committed, admitted, state),) = run.fetch_admin(BATCHES_SQL, (REQUEST,))
    prefix = _backfilled(run)
    run.fault(
        f"`ql3 schedule backfill` of {len(skipped)} skipped occurrences in {batches} batches of"
        f" {BATCH}, SIGKILLed after {committed} committed batches"
    )
    # Some but not all batches committed, and what did is exactly the earliest of them.
    assert 1 <= committed < batches, (committed, batches)
    assert state == "running"
    assert admitted == len(prefix) == committed * BATCH
    assert [at for at, _ in prefix] == skipped[: len(prefix)]

    # The rerun with the same request id: the rest, nothing twice.
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert rerun.returncode == 0, rerun.stderr
    rest = len(skipped) - len(prefix)
    assert f"admitted {rest}, already had a Run {len(prefix)}" in rerun.stdout, rerun.stdout
    elapsed = time.monotonic() - started
    backfilled = _backfilled(run)
    assert [at for at, _ in backfilled] == skipped
    assert {skip for _, skip in backfilled} == {skip_id}
    ((_, admitted, state),) = run.fetch_admin(BATCHES_SQL, (REQUEST,))
    assert (admitted, state) == (len(skipped), "done")
    assert run.fetch_admin("SELECT count(*) FROM ql3.skipped_occurrences") == [(1,)]

    # The cron series: every occurrence of the window that was not skipped, once, on time.
    on_time = {
        (schedule_id, at)
        for at in [first_cursor, *occurrences_between(definition.cron, "UTC", first_cursor,
                                                      definition.end_at_ms or 0)]
        if not skip_first <= at <= skip_last
    }  # fmt: skip
    outcome = run.finish(expected=on_time, bound=BOUND)
    run.note(
        f"killed after {committed} of {batches} batches ({len(prefix)} Runs); the rerun admitted"
        f" {rest} and found {len(prefix)} already admitted; backfill and rerun took"
        f" {elapsed:.1f} s"
    )
    run.evidence.verdict = (
        f"{len(skipped)} skipped occurrences backfilled once each across a SIGKILL;"
        f" {outcome.admitted} cron occurrences exact"
    )
