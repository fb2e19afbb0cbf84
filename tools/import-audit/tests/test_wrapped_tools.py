"""The well-kept tools do their share: import-linter, deptry and ruff each report on their own."""

from __future__ import annotations

from fix_trees import FIXTURES
from ql3_import_audit._contracts import check_contracts, contracts_ini
from ql3_import_audit._deptry import check_dependencies
from ql3_import_audit._layout import load_workspace
from ql3_import_audit._ruff import check_ruff


def _places(findings: list[object]) -> set[tuple[str, int, str]]:
    return {(f.path, f.line, f.rule) for f in findings}  # type: ignore[attr-defined]


def test_import_linter_finds_the_forbidden_directions_in_src() -> None:
    """import-linter's layers and forbidden contracts alone catch every src direction violation."""
    places = _places(list(check_contracts(load_workspace(FIXTURES / "direction"))))
    core = "packages/runtime-core/src/ql3_runtime_core/__init__.py"
    postgres = "packages/cluster-postgres/src/ql3_cluster_postgres/__init__.py"
    assert places == {
        (core, 5, "forbidden-direction"),
        (core, 6, "forbidden-direction"),
        (postgres, 5, "forbidden-direction"),
    }


def test_import_linter_forbids_product_src_importing_the_test_kit() -> None:
    """A forbidden contract over src alone reports product code importing ql3_testkit."""
    places = _places(list(check_contracts(load_workspace(FIXTURES / "testkit"))))
    postgres = "packages/cluster-postgres/src/ql3_cluster_postgres/__init__.py"
    assert places == {(postgres, 5, "forbidden-direction")}


def test_import_linter_private_modules_contract_finds_private_module_imports() -> None:
    """import-linter's private_modules contract catches the statically named private modules."""
    places = _places(list(check_contracts(load_workspace(FIXTURES / "edge"))))
    postgres = "packages/cluster-postgres/src/ql3_cluster_postgres/__init__.py"
    assert {(postgres, 8, "edge-import"), (postgres, 9, "edge-import")} <= places


def test_generated_contracts_use_the_three_contract_types() -> None:
    """The generated INI declares layers, forbidden and private_modules contracts."""
    text = contracts_ini(list(load_workspace(FIXTURES / "direction").packages))
    for contract_type in ("type = layers", "type = forbidden", "type = private_modules"):
        assert contract_type in text


def test_deptry_reports_the_unused_dependency_on_its_pyproject_line() -> None:
    """The DEP002 of deptry becomes an unused-dependency finding on the declaring line."""
    places = _places(list(check_dependencies(load_workspace(FIXTURES / "unused"))))
    assert places == {("packages/cluster-postgres/pyproject.toml", 6, "unused-dependency")}


def test_deptry_accepts_the_test_group_and_local_helpers_in_tests() -> None:
    """pytest, hypothesis and a tests-folder helper module are allowed imports in tests."""
    places = _places(list(check_dependencies(load_workspace(FIXTURES / "undeclared"))))
    tests = "packages/runtime-core/tests/test_undeclared.py"
    assert {place for place in places if place[0] == tests} == {(tests, 6, "undeclared-dependency")}


def test_ruff_banned_api_catches_the_wall_clock_imports() -> None:
    """The ruff TID251 run flags `from time import time`; the AST pass reports only the uses."""
    places = _places(list(check_ruff(load_workspace(FIXTURES / "clock"))))
    assert ("bench/bench_clock.py", 3, "rule-zero") in places
    assert ("packages/runtime-core/src/ql3_runtime_core/__init__.py", 11, "rule-zero") in places
