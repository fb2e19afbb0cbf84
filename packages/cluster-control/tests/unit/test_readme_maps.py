"""The README's module map names every module the installed wheel ships: a newcomer's guide."""

from __future__ import annotations

from pathlib import Path

import ql3_cluster_control
from ql3_test_support import check_module_map

_README_PATH = Path(__file__).parents[2] / "README.md"


def test_every_module_is_in_the_module_map() -> None:
    """Each private module of the installed package has its line in the module map, and no more.

    The rooms' modules count too, named by their path in the package (`worker/_slots`).
    """
    check_module_map(ql3_cluster_control, _README_PATH)
