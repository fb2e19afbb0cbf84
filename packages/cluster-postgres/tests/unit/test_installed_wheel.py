"""The tests run against the installed wheel, never the source tree (STYLE §9)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import ql3_cluster_postgres


def test_package_is_imported_from_site_packages() -> None:
    """ql3_cluster_postgres comes from site-packages (nox installs the built wheel)."""
    location = Path(ql3_cluster_postgres.__file__).resolve()
    assert "site-packages" in location.parts, location
    assert "packages" not in location.parts[: location.parts.index("site-packages")], location


def test_wheel_ships_py_typed_and_sql() -> None:
    """The installed package carries py.typed, its migrations and its provisioning SQL."""
    root = files("ql3_cluster_postgres")
    assert (root / "py.typed").is_file()
    assert (root / "migrations" / "0001_create_schema.sql").is_file()
    assert (root / "provisioning" / "roles_create_groups.sql").is_file()
