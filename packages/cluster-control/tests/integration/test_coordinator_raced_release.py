"""A commit raced by an admin change leaves no claim at rest (real PostgreSQL, real admin).

Pausing a schedule bumps its row's version and leaves its claim columns (DESIGN §5): the holder's
commit races and writes nothing. The Coordinator then hands the claim back (the release compares
the grant, `same_grant`, not the version). Before, the claim stayed on the paused row after its
lease, and `verify` reported it as a claim left at rest (`stale_claim`) for as long as the
schedule stayed paused. The control keeps the same race and skips the hand-back: the claim is
then still on the row and verify reports it, so the check can fail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from fix_db import db_now_ms, sql_rows, wait_for
from history import add_schedules
from ql3_cluster_control import Coordinator
from ql3_cluster_postgres import PostgresScheduleRepository, ScheduleAdmin, verify_history

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ClaimCommit, ClusterScheduleClaim, CommitBatch
    from ql3_testkit import Ql3Database

LEASE_MS = 1_000
_ROWS = (
    "SELECT name, state, claim_token IS NOT NULL, claim_expires_at_ms"
    " FROM ql3.trigger_schedules AS s JOIN ql3.tasks AS t ON t.id = s.task_id ORDER BY name"
)


class PausedUnderItsClaim(PostgresScheduleRepository):
    """The real repository; before its first commit an admin pauses `name` (real admin API)."""

    def __init__(self, dsn: str, *, admin_dsn: str, name: str, release: bool) -> None:
        super().__init__(dsn)
        self._admin_dsn, self._release = admin_dsn, release
        self._pause: str | None = name

    def commit_decisions(self, commits: Sequence[ClaimCommit]) -> CommitBatch:
        """Pause the chosen schedule (once), then commit: its claim's commit races."""
        if self._pause is not None:
            with ScheduleAdmin(self._admin_dsn) as admin:
                admin.pause(self._pause, reason="paused under its claim")
            self._pause = None
        return super().commit_decisions(commits)

    def release_claims(self, claims: Sequence[ClusterScheduleClaim]) -> int:
        """Release, or (the control) hand nothing back."""
        return super().release_claims(claims) if self._release else 0


@pytest.mark.parametrize("release", [True, False], ids=["hand-back", "control"])
def test_a_commit_raced_by_a_pause_leaves_no_claim_at_rest(
    ql3_db: Ql3Database, *, release: bool
) -> None:
    """The raced claim is released in the cycle; verify finds no claim at rest after its lease."""
    first = add_schedules(ql3_db.dsn("admin"), 2, prefix="raced")
    latest = max(first.values())
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= latest, timeout_s=5, what="due")
    kwargs: dict[str, Any] = {"admin_dsn": ql3_db.dsn("admin"), "name": "raced-0"}
    with PausedUnderItsClaim(ql3_db.dsn("runtime"), release=release, **kwargs) as repo:
        coordinator = Coordinator(repo, owner_id="a", lease_ms=LEASE_MS)
        result = coordinator.run_cycle()
        assert coordinator.held_claims == ()
    assert (result.summary.raced, result.summary.committed) == (1, 1)
    rows = sql_rows(ql3_db.superuser_dsn, _ROWS)
    assert [(name, state, claimed) for name, state, claimed, _ in rows] == [
        ("raced-0", "paused", not release),
        ("raced-1", "active", False),
    ]
    # Past the lease the claim would be at rest: judged with no grace, as the history checks do.
    expiry = rows[0][3] or db_now_ms(ql3_db.superuser_dsn)
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) > expiry, timeout_s=5, what="the lease")
    report = verify_history(ql3_db.dsn("admin"), stale_claim_grace_ms=0)
    assert report.violation_counts.get("stale_claim", 0) == (0 if release else 1)
