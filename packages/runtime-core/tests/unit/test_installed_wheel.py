"""The tests run against the installed wheel, never the source tree (STYLE §9)."""

from __future__ import annotations

from pathlib import Path

import ql3_runtime_core


def test_package_is_imported_from_site_packages() -> None:
    """ql3_runtime_core comes from site-packages (nox installs the built wheel), not packages/."""
    location = Path(ql3_runtime_core.__file__).resolve()
    assert "site-packages" in location.parts, location
    assert "packages" not in location.parts[: location.parts.index("site-packages")], location


def test_wheel_ships_py_typed() -> None:
    """The installed package carries its py.typed marker."""
    assert (Path(ql3_runtime_core.__file__).parent / "py.typed").is_file()
