"""The tests run against the installed wheel, never the source tree (DESIGN §14)."""

from __future__ import annotations

import ql3_runtime_core
from ql3_test_support import check_installed, check_ships


def test_package_is_imported_from_site_packages() -> None:
    """ql3_runtime_core comes from site-packages (nox installs the built wheel), not packages/."""
    check_installed(ql3_runtime_core)


def test_wheel_ships_py_typed() -> None:
    """The installed package carries its py.typed marker."""
    check_ships(ql3_runtime_core)
