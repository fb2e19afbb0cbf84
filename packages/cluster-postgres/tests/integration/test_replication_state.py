"""The replication-safety reading on a real primary and streaming standbys (DESIGN §13).

Each test builds its own small primary (the session cluster must not grow standbys) and reads it
as the least-privileged runtime role, which may not see `pg_stat_replication.sync_state`: the
verdict must come from the settings and the standby count alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

import pytest
from ql3_cluster_postgres import NoWritableServerError, PostgresScheduleRepository, ScheduleAdmin
from ql3_runtime_core import ClaimClusterScheduleCommand, ReplicationMode
from ql3_testkit import ThrowawayCluster, prepare_ql3_database

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database


@pytest.fixture
def primary() -> Iterator[ThrowawayCluster]:
    """Yield a primary of its own (its standbys stop with it)."""
    with ThrowawayCluster(name="ql3repl") as cluster:
        yield cluster


def _read(dsn: str) -> PostgresScheduleRepository:
    return PostgresScheduleRepository(dsn)


def test_a_primary_without_standbys_is_safe_and_names_itself(primary: ThrowawayCluster) -> None:
    """A lone primary reads as mode none (safe), with its address, system id and timeline 1."""
    db = prepare_ql3_database(primary, "lone")
    with _read(db.dsn("runtime")) as repository:
        state = repository.read_replication_state()
    assert state.mode is ReplicationMode.NONE
    assert not state.unsafe
    assert (state.host, state.port, state.timeline) == ("127.0.0.1", primary.port, 1)
    assert int(state.system_identifier) > 0


def test_an_asynchronous_standby_is_unsafe_and_a_synchronous_one_safe(
    primary: ThrowawayCluster,
) -> None:
    """Streaming without a synchronous standby is unsafe; naming a synchronous one makes it safe."""
    db = prepare_ql3_database(primary, "repl")
    primary.create_standby()
    with _read(db.dsn("runtime")) as repository:
        unsafe = repository.read_replication_state()
        assert (unsafe.mode, unsafe.unsafe, unsafe.standbys) == (
            ReplicationMode.ASYNCHRONOUS,
            True,
            1,
        )
        assert unsafe.sync_standbys is None  # hidden from ql3_runtime
        primary.create_standby(synchronous=True)
        repository.close()  # a new session reads the reloaded synchronous_commit
        safe = repository.read_replication_state()
    assert (safe.mode, safe.unsafe, safe.standbys) == (ReplicationMode.SYNCHRONOUS, False, 2)
    assert safe.commits_wait_for_standby
    with ScheduleAdmin(db.superuser_dsn) as admin:
        report = admin.status()
    assert report.replication is not None
    assert report.replication.sync_standbys == 1  # a superuser sees sync_state


def test_promotion_is_another_timeline_of_the_same_system(primary: ThrowawayCluster) -> None:
    """A standby reads as in recovery; once promoted it is timeline 2 of the same system."""
    db = prepare_ql3_database(primary, "promo")
    standby = primary.create_standby()
    on_standby = db.dsn("runtime", port=str(standby.port))
    with _read(db.dsn("runtime")) as repository:
        before = repository.read_replication_state()
    with _read(on_standby) as repository:
        recovering = repository.read_replication_state()
        assert recovering.mode is ReplicationMode.STANDBY
        primary.fence()
        standby.promote()
        repository.close()
        after = repository.read_replication_state()
    assert recovering.system_identifier == before.system_identifier
    assert (before.timeline, after.timeline) == (1, 2)
    assert after.changed_history(before)
    assert after.mode is ReplicationMode.NONE


def test_a_standby_refuses_claims_as_no_writable_server(primary: ThrowawayCluster) -> None:
    """Claiming on a standby, or finding only standbys for read-write, is NoWritableServerError."""
    db: Ql3Database = prepare_ql3_database(primary, "ro")
    standby = primary.create_standby()
    command = ClaimClusterScheduleCommand(owner_id="a", claim_token=uuid4(), lease_ms=5_000)
    with (
        _read(db.dsn("runtime", port=str(standby.port))) as repository,
        pytest.raises(NoWritableServerError, match="read-only"),
    ):
        repository.claim_round(command, 4)
    read_write = db.dsn(
        "runtime",
        host="127.0.0.1,127.0.0.1",
        port=f"{standby.port},{standby.port}",
        target_session_attrs="read-write",
    )
    with _read(read_write) as repository, pytest.raises(NoWritableServerError):
        repository.check_schema()
