"""QL3 test kit: throwaway PostgreSQL clusters, standbys, libfaketime, the wire fault proxy.

Never a dependency of the product wheels: the package tests, chaos/ and bench/ install it beside
them. `ThrowawayCluster` extends the product's `PrivateServer` (the one server `ql3 demo` starts)
with what only tests need; `PatroniCluster` runs three members under Patroni with etcd for
failover tests; `prepare_ql3_database` gives a migrated database with a login user per
role, cloned from a template in a tenth of a second.
"""

from __future__ import annotations

from importlib.metadata import version as _version

from ._binaries import server_major_version, testkit_bin_dir
from ._cluster import ThrowawayCluster
from ._databases import (
    Ql3Database,
    drop_database,
    login_password,
    login_user_name,
    prepare_ql3_database,
)
from ._durable_write import durable_write, durable_write_acknowledged_ms
from ._errors import ThrowawayClusterError
from ._faketime import find_faketime_library
from ._oracle import OracleFinding, OracleVerdict, oracle_verdict
from ._patroni import PatroniCluster
from ._patroni_setup import PatroniMember
from ._planted import plant_manual_run_at_cursor
from ._wire_fault_proxy import WireFaultProxy

__version__ = _version("ql3-testkit")

__all__ = [
    "OracleFinding",
    "OracleVerdict",
    "PatroniCluster",
    "PatroniMember",
    "Ql3Database",
    "ThrowawayCluster",
    "ThrowawayClusterError",
    "WireFaultProxy",
    "__version__",
    "drop_database",
    "durable_write",
    "durable_write_acknowledged_ms",
    "find_faketime_library",
    "login_password",
    "login_user_name",
    "oracle_verdict",
    "plant_manual_run_at_cursor",
    "prepare_ql3_database",
    "server_major_version",
    "testkit_bin_dir",
]
