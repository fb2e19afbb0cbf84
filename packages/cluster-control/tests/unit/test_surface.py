"""The public surface of ql3_cluster_control, tested from the installed wheel."""

from __future__ import annotations

import ql3_cluster_control


def test_all_is_sorted_and_complete() -> None:
    """`__all__` is sorted and lists exactly the public names of the package."""
    names = ql3_cluster_control.__all__
    assert names == sorted(names)
    public = {name for name in vars(ql3_cluster_control) if not name.startswith("_")}
    public -= {"annotations"}
    assert set(names) - {"__version__"} == public


def test_imported_from_site_packages() -> None:
    """The package under test is the installed wheel, not the source checkout."""
    path = ql3_cluster_control.__file__ or ""
    assert "site-packages" in path, path
