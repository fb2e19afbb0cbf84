"""The module-map check reads the README table and catches a module missing from it or extra."""

from __future__ import annotations

import types
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_test_support import check_module_map, mapped_modules

README = """# pkg

## Module map

| module | what it holds | public names |
|---|---|---|
| `_alpha` | the first | `Alpha` |
| `_beta` | the second | - |

## Next section

| `_not_a_module` | a table elsewhere | - |
"""


ROOMS_README = README.replace(
    "| `_beta` | the second | - |\n",
    "| `_beta` | the second | - |\n| `room/_gamma` | a module of the room `room` | - |\n",
)


def _package(root: Path, *modules: str) -> types.ModuleType:
    """Write a package `pkg` holding `modules` (`room/_x` makes `room` a subpackage of it)."""
    folder = root / "pkg"
    folder.mkdir()
    for name in ("__init__", "__main__", *modules):
        path = folder / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        for room in (path.parent, *path.parent.parents):
            if room == folder:
                break
            (room / "__init__.py").write_text("", encoding="utf-8")
        path.write_text("", encoding="utf-8")
    module = types.ModuleType("pkg")
    module.__file__ = str(folder / "__init__.py")
    return module


def test_mapped_modules_reads_only_the_module_map_table() -> None:
    """Rows of the module map count; a table under the next heading does not."""
    assert mapped_modules(README) == {"_alpha", "_beta"}
    assert mapped_modules("# no map here\n") == set()


def test_a_matching_map_passes(tmp_path: Path) -> None:
    """A package whose private modules are exactly the mapped ones passes."""
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    check_module_map(_package(tmp_path, "_alpha", "_beta"), readme)


@pytest.mark.parametrize(
    ("modules", "named"),
    [(("_alpha", "_beta", "_gamma"), "not mapped \\['_gamma'\\]"), (("_alpha",), "\\['_beta'\\]")],
)
def test_a_module_missing_or_extra_fails(
    tmp_path: Path, modules: tuple[str, ...], named: str
) -> None:
    """A shipped module without its line, or a line for a module not shipped, fails naming it."""
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    with pytest.raises(AssertionError, match=named):
        check_module_map(_package(tmp_path, *modules), readme)


def test_mapped_modules_reads_room_modules_by_their_path() -> None:
    """A room's module is mapped as `room/_module`."""
    assert mapped_modules(ROOMS_README) == {"_alpha", "_beta", "room/_gamma"}


def test_a_room_module_in_the_map_passes(tmp_path: Path) -> None:
    """A package whose top-level and room modules are exactly the mapped ones passes."""
    readme = tmp_path / "README.md"
    readme.write_text(ROOMS_README, encoding="utf-8")
    check_module_map(_package(tmp_path, "_alpha", "_beta", "room/_gamma"), readme)


@pytest.mark.parametrize(
    ("modules", "named"),
    [
        (("_alpha", "_beta", "room/_gamma", "room/_delta"), "not mapped \\['room/_delta'\\]"),
        (("_alpha", "_beta", "room/_gamma", "room/inner/_x"), "not mapped \\['room/inner/_x'\\]"),
        (("_alpha", "_beta"), "mapped but not shipped \\['room/_gamma'\\]"),
    ],
    ids=["room-module-unmapped", "inner-room-module-unmapped", "room-module-gone"],
)
def test_a_room_module_missing_or_extra_fails(
    tmp_path: Path, modules: tuple[str, ...], named: str
) -> None:
    """A room's modules are held to the map like top-level ones, named by their path."""
    readme = tmp_path / "README.md"
    readme.write_text(ROOMS_README, encoding="utf-8")
    with pytest.raises(AssertionError, match=named):
        check_module_map(_package(tmp_path, *modules), readme)


def test_a_folder_that_is_not_a_room_ships_no_module(tmp_path: Path) -> None:
    """A `_x.py` in a folder without `__init__.py` (data, not a subpackage) is not a module."""
    readme = tmp_path / "README.md"
    readme.write_text(ROOMS_README, encoding="utf-8")
    package = _package(tmp_path, "_alpha", "_beta", "room/_gamma")
    data = tmp_path / "pkg" / "data"
    data.mkdir()
    (data / "_template.py").write_text("", encoding="utf-8")
    check_module_map(package, readme)
