"""The README's module map and SQL map name every module and statement file the wheel ships.

The maps are how a newcomer finds where to work; a module or `.sql` file added
without a line there would be invisible to them, so the installed package is held against the
README of the checkout the tests run from.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import ql3_cluster_postgres
from ql3_test_support import check_module_map

_README_PATH = Path(__file__).parents[2] / "README.md"
_README = _README_PATH.read_text(encoding="utf-8")


def test_every_module_is_in_the_module_map() -> None:
    """Each private module of the installed package has its line in the module map, and no more.

    The rooms' modules count too, named by their path in the package (`verify/_stall`).
    """
    check_module_map(ql3_cluster_postgres, _README_PATH)


def test_every_sql_file_is_in_the_sql_map() -> None:
    """Each `.sql` file under sql/, provisioning/ and migrations/ is named in the SQL map."""
    section = _README.split("### SQL map", 1)[1].split("### The admission protocol", 1)[0]
    root = files("ql3_cluster_postgres")
    shipped = {
        entry.name
        for folder in ("sql", "provisioning", "migrations")
        for entry in root.joinpath(folder).iterdir()
        if entry.name.endswith(".sql")
    }
    assert shipped, "no statement file found in the installed package"
    missing = sorted(name for name in shipped if f"`{name}`" not in section)
    assert missing == []
