"""AST pass for the package closure where import-linter cannot look (DESIGN §15).

import-linter sees only the installed import packages; the tests folders are not packages and
`from ql3_x import _helper` (a private non-module name) never becomes a graph edge. This pass
checks both `src` and `tests` of every package:

- forbidden-direction: a lower layer importing a higher one, runtime-core importing psycopg, or
  product src importing the test kit (or a product pyproject declaring it as a dependency);
  tests may import the kit, declared in their package's `[dependency-groups] test`.
- edge-import: a sibling's submodule or `_private` name. A package's own tests MAY import its own
  private modules (they test the implementation); they see siblings only through `__all__`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._findings import RULE_DIRECTION, RULE_EDGE, Finding
from ._importmap import ImportTarget, import_targets, parse
from ._layout import (
    FORBIDDEN_EXTERNAL,
    LAYERS,
    Package,
    Workspace,
    normalize,
    requirement_line,
    requirement_name,
)

if TYPE_CHECKING:
    from pathlib import Path


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def forbidden_reason(
    importer: str, imported: str, test_kits: frozenset[str] = frozenset(), *, in_src: bool = True
) -> str | None:
    """Return why top-level package `importer` may not import `imported`, or None if it may.

    `test_kits` are the test kits' import names: product src (`in_src`) may not import them.
    """
    if in_src and importer in LAYERS and imported in test_kits:
        return (
            f"{importer} must not import the test kit {imported}: no product wheel depends on"
            " it (its tests may, declared in [dependency-groups] test)"
        )
    if imported in FORBIDDEN_EXTERNAL.get(importer, ()):
        return f"{importer} must not import {imported} (runtime-core does no I/O, DESIGN §15)"
    if (
        importer in LAYERS
        and imported in LAYERS
        and LAYERS.index(imported) > LAYERS.index(importer)
    ):
        order = " > ".join(reversed(LAYERS))
        return f"{importer} must not import higher layer {imported} (layers: {order})"
    return None


def edge_reason(importer: str, target: ImportTarget, siblings: frozenset[str]) -> str | None:
    """Return why `target` is an edge import for top-level package `importer`, or None."""
    if target.top == importer or target.top not in siblings:
        return None
    if "." in target.module:
        return f"{target.module} is inside sibling {target.top}; import from {target.top} only"
    if target.name is not None and _is_private(target.name):
        return f"{target.top}.{target.name} is private to {target.top}; use its __all__"
    return None


def _check_file(
    path: Path, package: Package, siblings: frozenset[str], test_kits: frozenset[str]
) -> list[tuple[int, str, str]]:
    tree = parse(path)
    in_src = path.is_relative_to(package.src)
    problems: list[tuple[int, str, str]] = []
    for target in import_targets(tree):
        direction = forbidden_reason(package.import_name, target.top, test_kits, in_src=in_src)
        if direction is not None:
            problems.append((target.line, RULE_DIRECTION, direction))
        edge = edge_reason(package.import_name, target, siblings)
        if edge is not None:
            problems.append((target.line, RULE_EDGE, edge))
    return problems


def _declared_test_kits(workspace: Workspace, package: Package) -> list[Finding]:
    """Return a finding per test kit a product wheel declares as a (runtime or extra) dependency."""
    kits = {p.distribution for p in workspace.packages if p.test_kit}
    if package.layer is None:
        return []
    declared = [name for name in map(requirement_name, package.requirements) if name in kits]
    return [
        Finding(
            workspace.relative(package.pyproject),
            requirement_line(package.pyproject, normalize(name)),
            RULE_DIRECTION,
            f"{package.distribution} must not depend on the test kit {name}; tests list it in"
            " [dependency-groups] test",
        )
        for name in declared
    ]


def check_imports(workspace: Workspace) -> list[Finding]:
    """Return direction and edge findings for every package's src, tests and declarations."""
    siblings = frozenset(LAYERS) | {package.import_name for package in workspace.packages}
    test_kits = workspace.test_kits
    findings: list[Finding] = []
    for package in workspace.packages:
        findings += _declared_test_kits(workspace, package)
        for folder in (package.src, package.tests):
            if not folder.is_dir():
                continue
            for path in workspace.python_files(folder):
                relative = workspace.relative(path)
                findings += [
                    Finding(relative, line, rule, detail)
                    for line, rule, detail in _check_file(path, package, siblings, test_kits)
                ]
    return findings
