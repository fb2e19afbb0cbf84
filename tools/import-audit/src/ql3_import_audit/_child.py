"""Run one of the audit's child-process entries with the audited `src/` folders first on the path.

Why a child: import-linter and grimp find a package through the import system, so the graph must
be built where the audited tree (a fixture tree shadows the installed packages) comes first on
`sys.path`; this process's `sys.path` and `sys.modules` stay untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from ._findings import AuditToolError

if TYPE_CHECKING:
    from pathlib import Path

    from ._layout import Package


def importable(packages: tuple[Package, ...]) -> list[Package]:
    """Return the packages whose import package exists under their `src/`."""
    return [p for p in packages if (p.src / p.import_name / "__init__.py").is_file()]


def run_child(module: str, packages: list[Package], cwd: Path, *args: str, tool: str) -> str:
    """Run `python -m module *args` over the packages' sources; return its standard output.

    Raises AuditToolError (naming the wrapped `tool`) when the child exits non-zero.
    """
    env = dict(os.environ)
    paths = [str(p.src) for p in packages]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # Our own interpreter and module with generated arguments: no untrusted input.
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=cwd,
    )
    if result.returncode != 0:
        raise AuditToolError(f"{tool} could not run: {result.stderr.strip()}")
    return result.stdout
