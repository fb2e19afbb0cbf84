"""The shared surface checks catch each drift they exist for, on planted modules."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
import ql3_test_support
from ql3_test_support import (
    all_sort_key,
    check_all_complete,
    check_all_sorted,
    check_installed,
    check_public_errors,
    check_ships,
    public_names,
)


def _error(name: str, module: str, base: type[Exception] = Exception) -> type[Exception]:
    """Make a fresh exception class that claims to live in `module`."""
    return type(name, (base,), {"__module__": module})


def _module(name: str = "planted", **attributes: object) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(attributes)
    return module


def _good(**changes: object) -> types.ModuleType:
    attributes: dict[str, object] = {
        "LIMIT": 1,
        "PlantedError": _error("PlantedError", "planted"),
        "__version__": "1.0",
        "helper": len,
        "__all__": ["LIMIT", "PlantedError", "__version__", "helper"],
        "_private": 2,
        "json": json,  # an imported module is not a public name
    }
    attributes.update(changes)
    return _module("planted", **attributes)


def test_a_consistent_module_passes_every_check() -> None:
    """A sorted, complete `__all__` with its errors at home passes."""
    module = _good()
    check_all_sorted(module)
    check_all_complete(module)
    check_public_errors(module, module.PlantedError)
    assert public_names(module) == {"LIMIT", "PlantedError", "__version__", "helper"}


def test_the_sort_is_ruff_ruf022_not_plain() -> None:
    """CONSTANTS come before Classes, then the rest; a plain sort would differ."""
    names = ["helper", "Klass", "CONST", "__version__"]
    assert sorted(names, key=all_sort_key) == ["CONST", "Klass", "__version__", "helper"]
    with pytest.raises(AssertionError, match="not sorted"):
        check_all_sorted(_good(__all__=["PlantedError", "LIMIT", "__version__", "helper"]))
    with pytest.raises(AssertionError, match="repeats"):
        check_all_sorted(_good(__all__=["LIMIT", "LIMIT", "PlantedError"]))


def test_a_public_name_missing_from_all_or_an_extra_one_is_named() -> None:
    """`__all__` must list every public name and nothing else; the message names both sides."""
    with pytest.raises(AssertionError, match=r"public but not listed \['helper'\]"):
        check_all_complete(_good(__all__=["LIMIT", "PlantedError", "__version__"]))
    listed = ["LIMIT", "PlantedError", "__version__", "ghost", "helper"]
    with pytest.raises(AssertionError, match=r"listed but not public \['ghost'\]"):
        check_all_complete(_good(__all__=listed))
    no_version = _good(__all__=["LIMIT", "PlantedError", "helper"])
    del no_version.__version__
    with pytest.raises(AssertionError, match="lacks __version__"):
        check_all_complete(no_version)


def test_errors_outside_the_family_or_away_from_home_are_named() -> None:
    """An exported error must subclass the family's base and show the package as its module."""
    stray = _good(
        StrayError=_error("StrayError", "planted"), __all__=["LIMIT", "PlantedError", "StrayError"]
    )
    with pytest.raises(AssertionError, match=r"outside PlantedError: \['StrayError'\]"):
        check_public_errors(stray, stray.PlantedError)
    away = _module(PlantedError=_error("PlantedError", "planted._errors"), __all__=["PlantedError"])
    with pytest.raises(AssertionError, match=r"PlantedError \(planted._errors\)"):
        check_public_errors(away, Exception)


def test_a_module_outside_site_packages_is_refused(tmp_path: Path) -> None:
    """A module loaded from a source folder fails `check_installed` naming its path."""
    source = tmp_path / "packages" / "demo" / "src" / "demo_mod.py"
    with pytest.raises(AssertionError, match="not from site-packages"):
        check_installed(_module("demo_mod", __file__=str(source)))
    installed = tmp_path / "venv" / "lib" / "site-packages" / "demo_mod.py"
    check_installed(_module("demo_mod", __file__=str(installed)))
    inside_packages = tmp_path / "packages" / "x" / ".venv" / "site-packages" / "demo_mod.py"
    with pytest.raises(AssertionError, match="source tree"):
        check_installed(_module("demo_mod", __file__=str(inside_packages)))


def test_missing_resources_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check_ships` names py.typed or any resource the installed package lacks."""
    package = tmp_path / "shipped_pkg"
    (package / "sql").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sql" / "one.sql").write_text("SELECT 1")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("shipped_pkg")
    try:
        with pytest.raises(AssertionError, match=r"lacks \['py.typed'\]"):
            check_ships(module, "sql/one.sql")
        (package / "py.typed").write_text("")
        check_ships(module, "sql/one.sql")
        with pytest.raises(AssertionError, match=r"lacks \['sql/two.sql'\]"):
            check_ships(module, "sql/two.sql")
    finally:
        sys.modules.pop("shipped_pkg", None)


def test_the_helper_passes_its_own_checks() -> None:
    """ql3_test_support itself has a sorted, complete surface and ships py.typed."""
    check_all_sorted(ql3_test_support)
    check_ships(ql3_test_support)
    assert public_names(ql3_test_support) == set(ql3_test_support.__all__)
