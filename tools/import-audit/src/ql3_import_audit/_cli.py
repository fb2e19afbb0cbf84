"""Command line of the import audit: `ql3-import-audit [--root PATH]`.

Exit status: 0 when the tree is clean, 1 when any finding is printed, 2 on a usage error or when
a wrapped tool (import-linter, deptry, ruff) cannot run at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._audit import run_audit
from ._findings import AuditToolError

if TYPE_CHECKING:
    from collections.abc import Sequence

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ql3-import-audit",
        description="Check the QL3 package closure and rule zero over src and tests.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path.cwd(),
        help="repository root holding packages/ (default: the current directory)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the audit, print one `file:line: rule: detail` line per finding, return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    root: Path = args.root
    if not (root / "packages").is_dir():
        parser.print_usage(sys.stderr)
        print(f"ql3-import-audit: error: --root {root}: no packages/ folder there", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    try:
        findings, audited = run_audit(root)
    except AuditToolError as exc:
        print(f"ql3-import-audit: error: {exc}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    for finding in findings:
        print(finding.render())  # noqa: T201
    verdict = f"{len(findings)} finding(s)" if findings else "clean"
    print(f"ql3-import-audit: {verdict} in {audited} package(s) under {root.resolve()}")  # noqa: T201
    return EXIT_FINDINGS if findings else EXIT_CLEAN
