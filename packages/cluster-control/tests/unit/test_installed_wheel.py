"""The tests run against the installed wheel, never the source tree (DESIGN §14, shared checks)."""

from __future__ import annotations

import ql3_cluster_control
from ql3_test_support import check_installed, check_ships


def test_package_is_imported_from_site_packages() -> None:
    """ql3_cluster_control comes from site-packages (nox installs the built wheel)."""
    check_installed(ql3_cluster_control)


def test_wheel_ships_py_typed() -> None:
    """The installed package carries its py.typed marker."""
    check_ships(ql3_cluster_control)
