"""The kit's tests run against its installed wheel, which ships its SQL and type marker."""

from __future__ import annotations

from importlib.metadata import requires
from importlib.resources import files
from pathlib import Path

import ql3_testkit


def test_package_is_imported_from_site_packages() -> None:
    """ql3_testkit comes from site-packages (nox installs the built wheel)."""
    location = Path(ql3_testkit.__file__).resolve()
    assert "site-packages" in location.parts, location


def test_wheel_ships_py_typed_and_sql() -> None:
    """The installed kit carries py.typed and the statements its loader reads."""
    root = files("ql3_testkit")
    assert (root / "py.typed").is_file()
    assert (root / "sql" / "database_create_from_template.sql").is_file()
    assert (root / "sql" / "cluster_standby_state.sql").is_file()


def test_no_product_wheel_depends_on_the_kit() -> None:
    """The installed product wheels' metadata never names ql3-testkit as a requirement."""
    for product in ("ql3-runtime-core", "ql3-cluster-postgres"):
        assert not [req for req in requires(product) or [] if req.startswith("ql3-testkit")]
