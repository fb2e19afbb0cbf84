"""The kit's tests run against its installed wheel, which ships its SQL and type marker."""

from __future__ import annotations

from importlib.metadata import requires

import ql3_testkit
from ql3_test_support import check_installed, check_ships


def test_package_is_imported_from_site_packages() -> None:
    """ql3_testkit comes from site-packages (nox installs the built wheel)."""
    check_installed(ql3_testkit)


def test_wheel_ships_py_typed_and_sql() -> None:
    """The installed kit carries py.typed and the statements its loader reads."""
    check_ships(
        ql3_testkit,
        "sql/database_create_from_template.sql",
        "sql/cluster_standby_state.sql",
    )


def test_no_product_wheel_depends_on_the_kit() -> None:
    """The installed product wheels' metadata never names ql3-testkit as a requirement."""
    for product in ("ql3-runtime-core", "ql3-cluster-postgres"):
        assert not [req for req in requires(product) or [] if req.startswith("ql3-testkit")]
