"""Discover what to audit under a root: the workspace packages, their declarations, extra folders.

The tree is read from disk (pyproject.toml files and `src/` folders), never from the installed
environment, so the same code audits the real checkout and the miniature fixture trees.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from typing import TYPE_CHECKING, Final

from ._findings import AuditToolError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Layer order, lowest first (DESIGN §15): a package may import only packages listed before it.
LAYERS: Final = ("ql3_runtime_core", "ql3_cluster_postgres", "ql3_cluster_control")
# Third-party imports a package must never make even if declared (runtime-core does no I/O).
FORBIDDEN_EXTERNAL: Final[dict[str, tuple[str, ...]]] = {
    "ql3_runtime_core": ("psycopg", "psycopg_pool"),
}
# Rooms: a package's subpackages as layers, top to bottom (import name -> room names relative to
# the package). A room may import the rooms below it, never one above; rooms on one line joined by
# ROOM_SIBLINGS are independent siblings that must not import each other. Modules directly in the
# package (its `__init__`, shared `_errors`...) belong to no room and are not constrained here.
# `_contracts` turns each non-empty entry into an import-linter `layers` contract with the package
# as its container. A package's entry is filled in once its rooms exist; the one non-empty entry
# belongs to the audit's own fixture trees (a package no real tree holds).
ROOM_SIBLINGS: Final = " | "
ROOMS: Final[dict[str, tuple[str, ...]]] = {
    "ql3_runtime_core": (),
    "ql3_cluster_postgres": (
        "console",
        "admin | verify | repository | ingress | server",
        "zones | schema",
    ),
    "ql3_cluster_control": ("cli", "demo | coordinator | worker | web"),
    "ql3_testkit": (),
    "ql3_rooms_fixture": ("cli", "service | worker", "store"),
}
# Workspace members that only tests use: no layer, never a product wheel's dependency. Package tests
# may import them (declared in their own `[dependency-groups] test`); product src may not.
TEST_KITS: Final = ("tools/pg-testkit",)
# Folders at the root that are audited for rule zero only (they are not wheels).
RULE_ZERO_ONLY: Final = ("bench", "chaos", "examples")
# The audit's own planted violations; never part of the audited tree.
FIXTURES: Final = "tools/import-audit/tests/fixtures"

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """Return the PEP 503 normalized form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """Return the normalized distribution name of a PEP 508 requirement string."""
    match = _REQUIREMENT_NAME.match(requirement)
    if match is None:
        msg = f"requirement {requirement!r} has no distribution name"
        raise ValueError(msg)
    return normalize(match.group(1))


def requirement_line(pyproject: Path, distribution: str) -> int:
    """Return the line declaring `distribution` in a pyproject (1 if it cannot be found)."""
    for number, text in enumerate(pyproject.read_text(encoding="utf-8").splitlines(), start=1):
        for match in re.finditer(r"[\"']\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^\"']*[\"']", text):
            before = text[: match.start()].rstrip()
            in_list = before == "" or before.endswith(("[", ","))
            if in_list and normalize(match.group(1)) == distribution:
                return number
    return 1


@dataclasses.dataclass(frozen=True)
class Package:
    """One wheel of the workspace: its folder, names and declared requirements.

    `requirements` are what the wheel declares (dependencies and extras); `test_requirements` the
    package's own `[dependency-groups] test` (what its test session installs beside it, such as
    the test kit). `test_kit` marks a package under `TEST_KITS`.
    """

    folder: Path
    distribution: str
    import_name: str
    requirements: tuple[str, ...]
    test_requirements: tuple[str, ...] = ()
    test_kit: bool = False

    @property
    def src(self) -> Path:
        """Return the `src/` folder (it may be missing in a fixture tree)."""
        return self.folder / "src"

    @property
    def tests(self) -> Path:
        """Return the `tests/` folder (it may be missing)."""
        return self.folder / "tests"

    @property
    def pyproject(self) -> Path:
        """Return the package's pyproject.toml."""
        return self.folder / "pyproject.toml"

    @property
    def layer(self) -> int | None:
        """Return the layer index (higher may import lower), None outside DESIGN §15's layers."""
        return LAYERS.index(self.import_name) if self.import_name in LAYERS else None


@dataclasses.dataclass(frozen=True)
class Workspace:
    """Everything the checks need to know about the audited tree."""

    root: Path
    packages: tuple[Package, ...]
    test_requirements: tuple[str, ...]

    @property
    def test_kits(self) -> frozenset[str]:
        """Return the import names of the test kits present."""
        return frozenset(package.import_name for package in self.packages if package.test_kit)

    def rule_zero_folders(self) -> list[Path]:
        """Return every folder audited for rule zero: package src/tests, bench, chaos, examples."""
        folders = [path for package in self.packages for path in (package.src, package.tests)]
        folders += [self.root / name for name in RULE_ZERO_ONLY]
        tools = self.root / "tools"
        if tools.is_dir():
            for tool in sorted(tools.iterdir()):
                folders += [tool / "src", tool / "tests"]
        # A test kit lives under tools/ and is a package too: each folder is audited once.
        return [folder for folder in dict.fromkeys(folders) if folder.is_dir()]

    def relative(self, path: Path) -> str:
        """Return `path` relative to the root in POSIX form (absolute paths outside stay as is)."""
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def python_files(self, folder: Path) -> Iterator[Path]:
        """Yield the Python files under `folder`, skipping caches, hidden folders and fixtures."""
        fixtures = self.root / FIXTURES
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).parts
            if any(part.startswith(".") or part == "__pycache__" for part in parts):
                continue
            if path.is_relative_to(fixtures):
                continue
            yield path


def _read_toml(path: Path) -> dict[str, object]:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def _import_name(folder: Path, distribution: str) -> str:
    """Return the single import package under src/, or the distribution name as an identifier."""
    src = folder / "src"
    if src.is_dir():
        candidates = sorted(
            child.name for child in src.iterdir() if (child / "__init__.py").is_file()
        )
        if len(candidates) == 1:
            return candidates[0]
    return distribution.replace("-", "_")


def _load_package(folder: Path, *, test_kit: bool = False) -> Package:
    pyproject = _read_toml(folder / "pyproject.toml")
    project = pyproject.get("project")
    groups = pyproject.get("dependency-groups")
    if not isinstance(project, dict):
        raise AuditToolError(f"{folder / 'pyproject.toml'} has no [project] table")
    distribution = str(project.get("name", folder.name))
    requirements = list(_strings(project.get("dependencies")))
    optional = project.get("optional-dependencies")
    if isinstance(optional, dict):
        for extra in sorted(optional):
            requirements += _strings(optional[extra])
    return Package(
        folder=folder,
        distribution=normalize(distribution),
        import_name=_import_name(folder, distribution),
        requirements=tuple(requirements),
        test_requirements=tuple(_group(groups, "test")) if isinstance(groups, dict) else (),
        test_kit=test_kit,
    )


def _group(groups: dict[str, object], name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Return a dependency group's requirement strings, following `include-group` entries."""
    entries = groups.get(name)
    if not isinstance(entries, list) or name in seen:
        return []
    result: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            result.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
            result += _group(groups, str(entry["include-group"]), seen | {name})
    return result


def load_workspace(root: Path) -> Workspace:
    """Read the packages under `root/packages/`, the test kits and the root `test` group."""
    root = root.resolve()
    packages_dir = root / "packages"
    folders = sorted(path.parent for path in packages_dir.glob("*/pyproject.toml"))
    kits = [root / kit for kit in TEST_KITS if (root / kit / "pyproject.toml").is_file()]
    test_requirements: list[str] = []
    root_pyproject = root / "pyproject.toml"
    if root_pyproject.is_file():
        groups = _read_toml(root_pyproject).get("dependency-groups")
        if isinstance(groups, dict):
            test_requirements = _group(groups, "test")
    return Workspace(
        root=root,
        packages=(
            *(_load_package(folder) for folder in folders),
            *(_load_package(folder, test_kit=True) for folder in kits),
        ),
        test_requirements=tuple(test_requirements),
    )
