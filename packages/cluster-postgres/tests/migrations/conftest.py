"""Fixtures of the migration tests: a database before any migration, a copy of the shipped files.

The upgrade tests start from the earlier schemas by deleting the later files from the copy.
"""

from __future__ import annotations

import shutil
import uuid
from importlib.resources import as_file, files
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql
from ql3_cluster_postgres import provision_roles
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _bare(cluster: ThrowawayCluster) -> Ql3Database:
    name = f"ql3_bare_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = Ql3Database(name=name, superuser_dsn=cluster.dsn(name))
    provision_roles(database.superuser_dsn)
    return database


@pytest.fixture
def bare_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a provisioned database with no migration applied (login users already exist)."""
    assert ql3_template  # the template created the cluster-wide login users
    database = _bare(pg_cluster)
    yield database
    drop_database(pg_cluster, database.name)


@pytest.fixture
def bare_faketime_db(
    faketime_cluster: ThrowawayCluster, faketime_template: str
) -> Iterator[Ql3Database]:
    """`bare_db` on the faketime cluster, whose clock a test may freeze; offset 0 afterwards."""
    assert faketime_template  # the template created the cluster-wide login users
    database = _bare(faketime_cluster)
    try:
        yield database
    finally:
        faketime_cluster.set_clock_offset_ms(0)
        drop_database(faketime_cluster, database.name)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """Return a writable copy of the shipped migrations folder."""
    target = tmp_path / "migrations"
    with as_file(files("ql3_cluster_postgres") / "migrations") as shipped:
        shutil.copytree(shipped, target)
    return target
