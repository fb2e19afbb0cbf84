"""The repository itself passes its own audit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fix_trees import REPO_ROOT
from ql3_import_audit._audit import run_audit
from ql3_import_audit._cli import main

if TYPE_CHECKING:
    import pytest


def test_repository_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    """`ql3-import-audit --root <repo>` exits 0: every package's src and tests obey the rules."""
    assert (REPO_ROOT / "packages").is_dir(), REPO_ROOT
    code = main(["--root", str(REPO_ROOT)])
    assert code == 0, capsys.readouterr().out


def test_fixture_trees_are_not_part_of_the_real_tree() -> None:
    """Auditing the repository never reports a planted violation from the fixture trees."""
    findings, audited = run_audit(REPO_ROOT)
    assert audited >= 3
    assert not [f for f in findings if f.path.startswith("tools/import-audit/tests/fixtures/")]
