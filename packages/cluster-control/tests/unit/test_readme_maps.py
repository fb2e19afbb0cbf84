"""The README's module map names every module the installed wheel ships: a newcomer's guide."""

from __future__ import annotations

from pathlib import Path

import ql3_cluster_control
from ql3_test_support import check_module_map


def test_every_module_is_in_the_module_map() -> None:
    """Each private module of the installed package has its line in the module map, and no more."""
    check_module_map(ql3_cluster_control, Path(__file__).parents[2] / "README.md")
