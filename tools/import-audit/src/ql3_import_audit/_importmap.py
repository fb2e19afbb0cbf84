"""Collect the import targets of one module's AST, including the dynamic forms.

Shared by the edge-import and forbidden-direction checks, which must see `importlib` tricks and
attribute access to a sibling's private names, not only import statements.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from ._findings import AuditToolError

if TYPE_CHECKING:
    from pathlib import Path

_DYNAMIC_IMPORTERS = frozenset({"importlib.import_module", "__import__"})


@dataclasses.dataclass(frozen=True)
class ImportTarget:
    """`module` imported at `line`; `name` is the member taken from it, if any."""

    line: int
    module: str
    name: str | None = None

    @property
    def top(self) -> str:
        """Return the top-level package of the imported module."""
        return self.module.split(".")[0]


def parse(path: Path) -> ast.Module:
    """Parse one source file; a file that does not parse stops the audit with its location."""
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        raise AuditToolError(f"{path}:{line}: cannot parse: {exc}") from exc


def bound_names(tree: ast.Module, *, modules_only: bool = False) -> dict[str, str]:
    """Map local names bound by import statements to the dotted name they hold.

    With `modules_only`, only `import x` / `import x as y` count (a name taken with `from` may be
    a class whose private attributes are not a module boundary).
    """
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and not modules_only
        ):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return bound.get(node.id, node.id if node.id == "__import__" else None)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def import_targets(tree: ast.Module) -> list[ImportTarget]:
    """Return every absolute import made by the module, in source order."""
    bound = bound_names(tree)
    modules = bound_names(tree, modules_only=True)
    targets: list[ImportTarget] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets += [ImportTarget(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets += [ImportTarget(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and _dotted(node.func, bound) in _DYNAMIC_IMPORTERS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                targets.append(ImportTarget(node.lineno, first.value))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            # `import ql3_runtime_core as core; core._cron` reaches a private name without an
            # import statement naming it.
            module = modules.get(node.value.id)
            if module is not None and node.attr.startswith("_"):
                targets.append(ImportTarget(node.lineno, module, node.attr))
    return sorted(targets, key=lambda target: target.line)
