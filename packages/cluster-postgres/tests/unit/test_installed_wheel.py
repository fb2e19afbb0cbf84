"""The tests run against the installed wheel, never the source tree (DESIGN §14, shared checks)."""

from __future__ import annotations

import ql3_cluster_postgres
from ql3_test_support import check_installed, check_ships


def test_package_is_imported_from_site_packages() -> None:
    """ql3_cluster_postgres comes from site-packages (nox installs the built wheel)."""
    check_installed(ql3_cluster_postgres)


def test_wheel_ships_py_typed_and_sql() -> None:
    """The installed package carries py.typed, its migrations, queries and provisioning SQL."""
    check_ships(
        ql3_cluster_postgres,
        "migrations/0001_create_schema.sql",
        "provisioning/roles_create_groups.sql",
        "provisioning/roles_provisioning_state.sql",
    )
