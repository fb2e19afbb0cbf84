"""The check that a package README's module map names every module the wheel ships.

Each package README has a `## Module map` (or `### Module map`) table whose first column is
`` `_module` `` for a top-level module and `` `room/_module` `` for a module of a subpackage (a
room; a room inside a room is `` `room/inner/_module` ``): how a newcomer finds where to work. A
module added, moved or renamed without its line would be invisible there, so each package's
tests hold the installed package against the README of the checkout they run from.
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
_ROW = re.compile(r"^\| `((?:\w+/)*_\w+)` \|", re.MULTILINE)


def mapped_modules(readme: str) -> set[str]:
    """Return the module paths (`_module`, `room/_module`) in the module map's first column."""
    found = _HEADING.search(readme)
    if found is None:
        return set()
    rest = readme[found.end() :]
    following = _NEXT_HEADING.search(rest)
    return set(_ROW.findall(rest if following is None else rest[: following.start()]))


def _shipped_modules(module: types.ModuleType) -> set[str]:
    """Return the private modules of the package `module`, its rooms' included, as map paths.

    A room is a subfolder with an `__init__.py`; a folder without one (migrations, SQL files)
    ships no module. Dunder modules (`__init__`, `__main__`) are not private modules.
    """
    folder = Path(module.__file__ or "").parent
    shipped: set[str] = set()
    for path in folder.rglob("_*.py"):
        relative = path.relative_to(folder)
        rooms = [
            folder.joinpath(*relative.parts[:depth]) for depth in range(1, len(relative.parts))
        ]
        if path.stem.startswith("__") or not all(
            (room / "__init__.py").is_file() for room in rooms
        ):
            continue
        shipped.add(relative.with_suffix("").as_posix())
    return shipped


def check_module_map(module: types.ModuleType, readme: Path) -> None:
    """Require the module map of `readme` to list exactly the private modules of `module`.

    Those of its rooms count too, named by their path in the package (`room/_module`).

    Raises:
        AssertionError: naming the modules missing from the map and those it names in vain.

    """
    shipped = _shipped_modules(module)
    mapped = mapped_modules(readme.read_text(encoding="utf-8"))
    if not shipped or mapped != shipped:
        message = (
            f"{readme} module map differs from {module.__name__}: not mapped"
            f" {sorted(shipped - mapped)}, mapped but not shipped {sorted(mapped - shipped)}"
        )
        raise AssertionError(message)
