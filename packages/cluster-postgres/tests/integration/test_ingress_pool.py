"""The worker ingress pool hands out live connections without a round trip per call.

A pooled connection is probed (an empty query) only when it may be dead: its socket has input an
idle connection never gets (the server's FATAL as it ended the session, then end of file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import psycopg
from ingress_helpers import admit, take
from ql3_cluster_postgres import WorkerIngress

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_a_pooled_connection_ended_by_the_server_is_replaced_without_a_failed_call(
    ql3_db: Ql3Database,
) -> None:
    """pg_terminate_backend on the ingress's idle connection: the next calls still succeed.

    A healthy idle connection is handed out without a probe; one the server ended has input
    waiting (the server's FATAL, then end of file), so it is probed, dropped and replaced.
    """
    admit(ql3_db, 2)
    token = uuid4()
    with WorkerIngress(ql3_db.dsn("worker_ingress"), max_connections=1) as ingress:
        (first,) = take(ingress, token, limit=1)
        with psycopg.connect(ql3_db.superuser_dsn, autocommit=True) as admin:
            (pids,) = admin.execute(
                "SELECT array_agg(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = 'ql3-worker'"
            ).fetchone() or ([],)
            assert len(pids) == 1
            # With a timeout it returns once the backend has exited (false if it did not within
            # 10 s): its FATAL is then on the socket, so the connection is one the server ended,
            # not one it is still ending while the next call starts.
            (ended,) = admin.execute(
                "SELECT pg_terminate_backend(%s, 10000)", (pids[0],)
            ).fetchone() or (False,)
            assert ended
        (second,) = take(ingress, token, limit=1)
    assert first.attempt_id != second.attempt_id
