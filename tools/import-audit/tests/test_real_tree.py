"""The repository itself passes its own audit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fix_trees import REPO_ROOT
from ql3_import_audit._cli import main

if TYPE_CHECKING:
    import pytest


def test_repository_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    """`ql3-import-audit --root <repo>` exits 0: every package's src and tests obey the rules."""
    assert (REPO_ROOT / "packages").is_dir(), REPO_ROOT
    code = main(["--root", str(REPO_ROOT)])
    assert code == 0, capsys.readouterr().out
