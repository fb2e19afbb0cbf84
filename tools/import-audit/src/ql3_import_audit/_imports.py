"""AST pass for the package closure where import-linter cannot look (SPEC §3).

import-linter sees only the installed import packages; the tests folders are not packages and
`from ql3_x import _helper` (a private non-module name) never becomes a graph edge. This pass
checks both `src` and `tests` of every package:

- forbidden-direction: a lower layer importing a higher one, or runtime-core importing psycopg.
- edge-import: a sibling's submodule or `_private` name. A package's own tests MAY import its own
  private modules (they test the implementation); they see siblings only through `__all__`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._findings import RULE_DIRECTION, RULE_EDGE, Finding
from ._importmap import ImportTarget, import_targets, parse
from ._layout import FORBIDDEN_EXTERNAL, LAYERS, Package, Workspace

if TYPE_CHECKING:
    from pathlib import Path


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def forbidden_reason(importer: str, imported: str) -> str | None:
    """Return why top-level package `importer` may not import `imported`, or None if it may."""
    if imported in FORBIDDEN_EXTERNAL.get(importer, ()):
        return f"{importer} must not import {imported} (runtime-core does no I/O, SPEC §3)"
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
    path: Path, package: Package, siblings: frozenset[str]
) -> list[tuple[int, str, str]]:
    tree = parse(path)
    problems: list[tuple[int, str, str]] = []
    for target in import_targets(tree):
        direction = forbidden_reason(package.import_name, target.top)
        if direction is not None:
            problems.append((target.line, RULE_DIRECTION, direction))
        edge = edge_reason(package.import_name, target, siblings)
        if edge is not None:
            problems.append((target.line, RULE_EDGE, edge))
    return problems


def check_imports(workspace: Workspace) -> list[Finding]:
    """Return direction and edge findings for every package's src and tests."""
    siblings = frozenset(LAYERS) | {package.import_name for package in workspace.packages}
    findings: list[Finding] = []
    for package in workspace.packages:
        for folder in (package.src, package.tests):
            if not folder.is_dir():
                continue
            for path in workspace.python_files(folder):
                relative = workspace.relative(path)
                findings += [
                    Finding(relative, line, rule, detail)
                    for line, rule, detail in _check_file(path, package, siblings)
                ]
    return findings
