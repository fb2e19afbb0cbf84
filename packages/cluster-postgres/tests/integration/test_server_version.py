"""The session runs on the PostgreSQL version it was asked for (the version matrix)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ql3_cluster_postgres import find_postgres_bin_dir
from ql3_testkit import server_major_version
from repo_helpers import fetch

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database


def test_the_server_is_the_version_the_session_asked_for(ql3_db: Ql3Database) -> None:
    """`server_version_num` is QL3TEST_PG_VERSION's major, or the product's default server's."""
    asked = os.environ.get("QL3TEST_PG_VERSION")
    expected = int(asked) if asked else server_major_version(find_postgres_bin_dir())
    ((version_num,),) = fetch(ql3_db.dsn("runtime"), "SELECT current_setting('server_version_num')")
    assert int(version_num) // 10_000 == expected
