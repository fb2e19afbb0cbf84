"""The README's module map names every module the installed wheel ships: a newcomer's guide."""

from __future__ import annotations

import re
from pathlib import Path

import ql3_cluster_control
from ql3_test_support import check_module_map

_README_PATH = Path(__file__).parents[2] / "README.md"


def test_every_module_is_in_the_module_map() -> None:
    """Each private module of the installed package has its line in the module map, and no more.

    The top-level modules go through the shared check; the rooms' modules (`worker/_slots`) are
    named by their path in the package, which that check does not read, so they are held here.
    """
    check_module_map(ql3_cluster_control, _README_PATH)
    package = Path(ql3_cluster_control.__file__).parent
    shipped = {
        path.relative_to(package).with_suffix("").as_posix()
        for path in package.glob("*/_*.py")
        if not path.name.startswith("__")
    }
    readme = _README_PATH.read_text(encoding="utf-8")
    section = readme.split("## Module map", 1)[1].split("## Try it", 1)[0]
    mapped = set(re.findall(r"^\| `(\w+/_\w+)` \|", section, flags=re.MULTILINE))
    assert shipped, "no room module found in the installed package"
    assert (sorted(shipped - mapped), sorted(mapped - shipped)) == ([], [])
