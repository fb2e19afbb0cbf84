"""Physical promotion (DESIGN §13): a claim taken on the primary survives failover and is honoured.

Primary + streaming standby; a claim is taken on the primary (by a Coordinator that then
vanishes); the standby replays that WAL; the old primary is fenced; the standby is promoted
(timeline 1 -> 2, checked); a fresh `ql3 run` against the new primary admits the occurrence only
after the claim's expiry by the new primary's clock: exactly 1 Run / 1 Attempt / 2 Events.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from harness import SLACK, Bound, db_now_ms, fetch, wait_until
from psycopg.conninfo import make_conninfo
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import ClaimClusterScheduleCommand

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

DOOMED_LEASE_MS = 5_000
LEASE_MS = 2_000
PROMOTED_TIMELINE = 2
REPLAYED_SQL = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"


def test_claim_on_old_primary_is_honoured_after_promotion(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """The new primary's Coordinator waits for the replicated claim to expire, then admits once."""
    run = scenario("physical-promotion", "5")
    run.prepare()
    primary = run.cluster
    assert primary is not None
    standby = primary.create_standby()
    assert (primary.timeline(), standby.timeline()) == (1, 1)
    (schedule_id,) = run.add_schedules(1, window_s=1)
    _, occurrence = run.schedules[schedule_id]
    wait_until(lambda: run.now_ms() >= occurrence, timeout_s=5, what="the occurrence is due")
    with PostgresScheduleRepository(run.dsn("runtime")) as repository:
        command = ClaimClusterScheduleCommand(
            owner_id="doomed-coordinator", claim_token=uuid.uuid4(), lease_ms=DOOMED_LEASE_MS
        )
        claims = repository.claim_due_schedules(command, 1)
    assert [claim.schedule_id for claim in claims] == [schedule_id]
    claim = claims[0]
    run.fault("claim taken on the primary by a Coordinator that then disappears")
    lsn = fetch(primary.dsn(), "SELECT pg_current_wal_insert_lsn()::text")[0][0]
    wait_until(
        lambda: bool(fetch(standby.dsn(), REPLAYED_SQL, (lsn,))[0][0]),
        timeout_s=15,
        what="the standby replayed the claim's WAL",
    )
    new_admin = make_conninfo(run.dsn("admin"), port=str(standby.port))
    replicated = fetch(
        new_admin,
        "SELECT claim_owner_id, claim_expires_at_ms FROM ql3.trigger_schedules WHERE id = %s",
        (schedule_id,),
    )
    assert replicated == [("doomed-coordinator", claim.claim_expires_at_ms)]
    primary.fence()
    standby.promote()
    timeline = standby.timeline()
    assert timeline == PROMOTED_TIMELINE, f"timeline after promotion is {timeline}, expected 2"
    run.fault("old primary fenced, standby promoted (timeline 1 -> 2)")
    promoted_at = db_now_ms(new_admin)
    fresh = run.replica(
        lease_ms=LEASE_MS, dsn=make_conninfo(run.dsn("runtime"), port=str(standby.port))
    )
    fresh.wait_ready()
    ready_at = db_now_ms(new_admin)
    run.wait_exhausted(timeout_s=30, dsn=new_admin)
    rows = fetch(
        new_admin,
        "SELECT owner_id, created_at_ms FROM ql3.runs WHERE schedule_id = %s",
        (schedule_id,),
    )
    assert len(rows) == 1, rows
    owner, created = rows[0]
    assert owner != "doomed-coordinator"
    assert created >= claim.claim_expires_at_ms, (
        f"admitted at {created}, before the replicated claim expired at"
        f" {claim.claim_expires_at_ms} (new primary's clock)"
    )
    run.note(
        f"timeline {timeline}; admitted {created - claim.claim_expires_at_ms} ms after the"
        f" claim's expiry; promoted {max(0, claim.claim_expires_at_ms - promoted_at)} ms before it"
    )
    # The occurrence was claimed (measured) after it fell due; nobody may take it before the
    # doomed claim's lease ends; if the fresh replica was connected only after that (measured),
    # that start counts too; then the replica wakes on the expiry hint within a cycle slack.
    acquired = claim.claim_expires_at_ms - DOOMED_LEASE_MS
    late_start = max(0, ready_at - claim.claim_expires_at_ms)
    bound = Bound.of(
        ("claimed after due, measured", acquired - occurrence),
        ("doomed claim's lease", DOOMED_LEASE_MS),
        ("fresh replica connected after the expiry, measured", late_start),
        SLACK,
    )
    run.finish(dsn=new_admin, bound=bound)
