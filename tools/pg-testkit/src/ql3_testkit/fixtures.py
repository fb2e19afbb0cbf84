"""pytest fixtures for real PostgreSQL: load with `pytest_plugins = ["ql3_testkit.fixtures"]`.

A plugin module, not a `pytest11` entry point: installing the kit enables nothing, a conftest
asks for it. Every fixture runs a real PostgreSQL (`ThrowawayCluster`); nothing is mocked and a
missing server or libfaketime is an error saying what to install, never a skip.

- `pg_cluster` (session): one non-durable cluster (fsync/full_page_writes/synchronous_commit off)
  shared by the whole session, with room for 200 connections. Use `pg_cluster.dsn(dbname)` only
  for superuser work (provisioning, crafting rows a role may not write).
- `ql3_template` (session): name of a migrated, provisioned template database on `pg_cluster`.
- `ql3_db` (function): a `Ql3Database` cloned from the template (fast, ~0.1 s), dropped WITH
  (FORCE) after the test. Connect as the least-privileged role the test needs:
  `psycopg.connect(ql3_db.dsn("runtime"))` (roles: owner, admin, runtime, worker_ingress; real
  login users `ql3_login_<role>` with SCRAM passwords over TCP).
- `faketime_cluster` (session): a second cluster running under libfaketime;
  `faketime_cluster.set_clock_offset_ms(ms)` moves its database clock live (open connections
  see the step at once).
- `faketime_db` (function): a `Ql3Database` on `faketime_cluster`; the clock offset is 0 when the
  test starts and is reset to 0 after it.
- `patroni_cluster` (module): a `PatroniCluster` (three members, etcd, `synchronous_mode`),
  started for the module's tests (~15 s) and torn down after them.
- `make_ql3_db` (function): a factory `make_ql3_db(cluster=None) -> Ql3Database` for tests that
  need several databases; each is dropped after the test.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from ._cluster import ThrowawayCluster
from ._databases import Ql3Database, drop_database, prepare_ql3_database
from ._patroni import PatroniCluster

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "faketime_cluster",
    "faketime_db",
    "faketime_template",
    "make_ql3_db",
    "patroni_cluster",
    "pg_cluster",
    "ql3_db",
    "ql3_template",
]

_TEMPLATE = "ql3_template"


def _unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[ThrowawayCluster]:
    """Yield one throwaway PostgreSQL for the session, torn down even when tests fail."""
    # cluster-control's end-to-end tests run several `ql3 run` replicas and `ql3 worker`s at once
    # (a worker pools concurrency + 2 connections): the server default of 100 is too few.
    with ThrowawayCluster(
        durable=False, name="ql3test", settings={"max_connections": "200"}
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def ql3_template(pg_cluster: ThrowawayCluster) -> Iterator[str]:
    """Yield the name of a provisioned, migrated template database on `pg_cluster`."""
    prepare_ql3_database(pg_cluster, _TEMPLATE, as_template=True)
    yield _TEMPLATE
    drop_database(pg_cluster, _TEMPLATE)


@pytest.fixture
def ql3_db(pg_cluster: ThrowawayCluster, ql3_template: str) -> Iterator[Ql3Database]:
    """Yield a fresh QL3 database cloned from the template, dropped after the test."""
    name = _unique_name("ql3_t")
    database = prepare_ql3_database(pg_cluster, name, template=ql3_template)
    yield database
    drop_database(pg_cluster, name)


@pytest.fixture(scope="session")
def faketime_cluster() -> Iterator[ThrowawayCluster]:
    """Yield a throwaway PostgreSQL under libfaketime whose clock offset tests may move."""
    with ThrowawayCluster(durable=False, faketime=True, name="ql3fake") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def faketime_template(faketime_cluster: ThrowawayCluster) -> Iterator[str]:
    """Yield the name of a provisioned, migrated template on `faketime_cluster`."""
    prepare_ql3_database(faketime_cluster, _TEMPLATE, as_template=True)
    yield _TEMPLATE
    drop_database(faketime_cluster, _TEMPLATE)


@pytest.fixture
def faketime_db(
    faketime_cluster: ThrowawayCluster, faketime_template: str
) -> Iterator[Ql3Database]:
    """Yield a fresh QL3 database on the faketime cluster; clock offset 0 before and after."""
    faketime_cluster.set_clock_offset_ms(0)
    name = _unique_name("ql3_f")
    database = prepare_ql3_database(faketime_cluster, name, template=faketime_template)
    try:
        yield database
    finally:
        faketime_cluster.set_clock_offset_ms(0)
        drop_database(faketime_cluster, name)


@pytest.fixture
def make_ql3_db(
    pg_cluster: ThrowawayCluster, ql3_template: str
) -> Iterator[Callable[..., Ql3Database]]:
    """Return a factory of extra QL3 databases (default: on `pg_cluster`), dropped afterwards."""
    made: list[tuple[ThrowawayCluster, str]] = []

    def make(cluster: ThrowawayCluster | None = None) -> Ql3Database:
        target = cluster or pg_cluster
        name = _unique_name("ql3_m")
        template = ql3_template if target is pg_cluster else None
        made.append((target, name))
        return prepare_ql3_database(target, name, template=template)

    yield make
    for cluster, name in made:
        drop_database(cluster, name)


@pytest.fixture(scope="module")
def patroni_cluster() -> Iterator[PatroniCluster]:
    """Yield a three-member Patroni cluster with etcd, torn down after the module's tests."""
    with PatroniCluster() as cluster:
        yield cluster
