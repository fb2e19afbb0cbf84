"""Upgrading to schema 14, the web console's reader.

Existing history becomes readable by `ql3_observer`, column by column, and
`ql3.verify_results` starts empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest
from migration_files import keep_up_to, seed_minute_schedule
from ql3_cluster_postgres import ConsoleReader, migrate, record_zone_rules
from repo_helpers import fetch

if TYPE_CHECKING:
    from pathlib import Path

    from ql3_testkit import Ql3Database


def test_upgrade_to_the_observer_keeps_history_readable(bare_db: Ql3Database, source: Path) -> None:
    """Rows written under schema 11 are on the console after the upgrade; tokens stay hidden."""
    keep_up_to(source, 11)
    migrate(bare_db.dsn("owner"), source=source)
    seed_minute_schedule(bare_db.dsn("owner"), run=("old-replica", 60250))
    migrate(bare_db.dsn("owner"))
    record_zone_rules(bare_db.dsn("owner"))
    assert fetch(bare_db.dsn("owner"), "SELECT count(*) FROM ql3.verify_results") == [(0,)]
    with ConsoleReader(bare_db.dsn("observer")) as reader:
        (row,) = reader.schedules().schedules
        assert (row.name, row.last_scheduled_for_ms, row.last_outcome) == ("old", 60_000, None)
        replicas = reader.replicas()
        assert [(a.owner_id, a.last_admitted_at_ms) for a in replicas.admissions] == [
            ("old-replica", 60_250)
        ]
        assert reader.verify_result()[1] is None
    with (
        psycopg.connect(bare_db.dsn("observer"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT claim_token FROM ql3.runs")
