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


def _package(root: Path, *modules: str) -> types.ModuleType:
    folder = root / "pkg"
    folder.mkdir()
    for name in ("__init__", "__main__", *modules):
        (folder / f"{name}.py").write_text("", encoding="utf-8")
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
