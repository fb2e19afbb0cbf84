"""The check that a package README's module map names every module the wheel ships.

Each package README has a `## Module map` (or `### Module map`) table whose first column is
`` `_module` ``: how a newcomer finds where to work. A module added or renamed without its line
would be invisible there, so each package's tests hold the installed package against the README
of the checkout they run from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import types

__all__ = ["check_module_map", "mapped_modules"]

_HEADING = re.compile(r"^#{2,3} Module map$", re.MULTILINE)
_NEXT_HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
_ROW = re.compile(r"^\| `(_\w+)` \|", re.MULTILINE)


def mapped_modules(readme: str) -> set[str]:
    """Return the module names in the first column of the README's module map table."""
    found = _HEADING.search(readme)
    if found is None:
        return set()
    rest = readme[found.end() :]
    following = _NEXT_HEADING.search(rest)
    return set(_ROW.findall(rest if following is None else rest[: following.start()]))


def check_module_map(module: types.ModuleType, readme: Path) -> None:
    """Require the module map of `readme` to list exactly the private modules of `module`.

    Raises:
        AssertionError: naming the modules missing from the map and those it names in vain.

    """
    folder = Path(module.__file__ or "").parent
    shipped = {path.stem for path in folder.glob("_*.py") if not path.stem.startswith("__")}
    mapped = mapped_modules(readme.read_text(encoding="utf-8"))
    if not shipped or mapped != shipped:
        message = (
            f"{readme} module map differs from {module.__name__}: not mapped"
            f" {sorted(shipped - mapped)}, mapped but not shipped {sorted(mapped - shipped)}"
        )
        raise AssertionError(message)
