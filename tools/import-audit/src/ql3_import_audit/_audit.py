"""Run every check over one root and merge their findings under one exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._clock import check_clock
from ._contracts import check_contracts
from ._cycles import check_cycles
from ._deptry import check_dependencies
from ._findings import Finding, deduplicate
from ._imports import check_imports
from ._independence import check_independence
from ._layout import load_workspace
from ._ruff import check_ruff

if TYPE_CHECKING:
    from pathlib import Path


def run_audit(root: Path) -> tuple[list[Finding], int]:
    """Return the sorted, de-duplicated findings and the number of packages audited."""
    workspace = load_workspace(root)
    # The AST passes run first: they parse every file and name the one that does not parse.
    findings = [
        *check_imports(workspace),
        *check_independence(workspace),
        *check_clock(workspace),
        *check_contracts(workspace),
        *check_cycles(workspace),
        *check_dependencies(workspace),
        *check_ruff(workspace),
    ]
    return deduplicate(findings), len(workspace.packages)
