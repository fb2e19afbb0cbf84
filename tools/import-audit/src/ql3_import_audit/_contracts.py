"""Run import-linter's `layers`, `forbidden` and `private_modules` contracts over the src trees.

The contracts are generated per audited root (only for the packages that exist there) into a
temporary INI file, so the repository's root pyproject carries no import-linter configuration.
import-linter runs in a child interpreter whose PYTHONPATH puts the audited `src/` folders first:
the graph is then built from the audited tree (a fixture tree shadows the installed packages), and
this process's `sys.path` and `sys.modules` stay untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ._findings import RULE_DIRECTION, RULE_EDGE, AuditToolError, Finding
from ._imports import forbidden_reason
from ._layout import FORBIDDEN_EXTERNAL, LAYERS, Package, Workspace

if TYPE_CHECKING:
    from collections.abc import Sequence


class _Link(TypedDict):
    """One import blamed by a broken contract, as `_linter_worker` prints it."""

    importer: str
    imported: str
    line_numbers: list[int]
    contract: str


_CONTRACT_TYPES = (
    "forbidden: importlinter.contracts.forbidden.ForbiddenContract",
    "layers: importlinter.contracts.layers.LayersContract",
    "private_modules: importlinter.contracts.private_modules.PrivateModulesContract",
)


def _lines(values: Sequence[str]) -> str:
    return "".join(f"\n    {value}" for value in values)


def contracts_ini(packages: list[Package]) -> str:
    """Return the import-linter INI configuration for the given (existing) packages."""
    names = [package.import_name for package in packages]
    kits = [package.import_name for package in packages if package.test_kit]
    sections = [
        "[importlinter]",
        f"root_packages ={_lines(names)}",
        "include_external_packages = True",
        f"contract_types ={_lines(_CONTRACT_TYPES)}",
        "",
        "[importlinter:contract:private]",
        "name = private modules stay inside their package",
        "type = private_modules",
        f"packages_with_private_modules ={_lines(names)}",
        "unmatched_ignore_imports_alerting = none",
    ]
    layered = [name for name in reversed(LAYERS) if name in names]
    if len(layered) > 1:
        sections += [
            "",
            "[importlinter:contract:layers]",
            "name = higher layers import lower layers only",
            "type = layers",
            f"layers ={_lines(layered)}",
        ]
    for source, forbidden in sorted(FORBIDDEN_EXTERNAL.items()):
        if source in names:
            sections += [
                "",
                f"[importlinter:contract:forbidden-{source}]",
                f"name = {source} imports no driver",
                "type = forbidden",
                f"source_modules = {source}",
                f"forbidden_modules ={_lines(forbidden)}",
            ]
    product = [name for name in LAYERS if name in names]
    if kits and product:
        sections += [
            "",
            "[importlinter:contract:forbidden-test-kits]",
            "name = product wheels never import the test kit",
            "type = forbidden",
            f"source_modules ={_lines(product)}",
            f"forbidden_modules ={_lines(kits)}",
        ]
    return "\n".join(sections) + "\n"


def _module_file(package: Package, module: str) -> Path:
    base = package.src.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _finding(workspace: Workspace, packages: list[Package], link: _Link) -> list[Finding]:
    importer, imported = link["importer"], link["imported"]
    owner = next(p for p in packages if importer.split(".", maxsplit=1)[0] == p.import_name)
    path = workspace.relative(_module_file(owner, importer))
    lines = link["line_numbers"]
    if link["contract"] == "private_modules":
        rule = RULE_EDGE
        detail = f"{imported} is private to its package (import-linter)"
    else:
        reason = forbidden_reason(
            importer.split(".", maxsplit=1)[0],
            imported.split(".", maxsplit=1)[0],
            workspace.test_kits,
        )
        if reason is None:
            # A hop inside a longer chain that is itself allowed; the offending hop is reported.
            return []
        rule, detail = RULE_DIRECTION, f"{reason} (import-linter)"
    return [Finding(path, line, rule, detail) for line in lines]


def check_contracts(workspace: Workspace) -> list[Finding]:
    """Return the findings of import-linter's contracts over every package's `src`."""
    packages = [p for p in workspace.packages if (p.src / p.import_name / "__init__.py").is_file()]
    if not packages:
        return []
    with tempfile.TemporaryDirectory(prefix="ql3-import-audit-") as tmp:
        config = Path(tmp) / "importlinter.ini"
        config.write_text(contracts_ini(packages), encoding="utf-8")
        env = dict(os.environ)
        paths = [str(p.src) for p in packages]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        # Our own interpreter and module with a generated config path: no untrusted input.
        result = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "ql3_import_audit._linter_worker", str(config)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=tmp,
        )
    if result.returncode != 0:
        raise AuditToolError(f"import-linter could not run: {result.stderr.strip()}")
    links: list[_Link] = json.loads(result.stdout)
    return [finding for link in links for finding in _finding(workspace, packages, link)]
