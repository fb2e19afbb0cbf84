"""The repository itself passes its own audit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fix_trees import REPO_ROOT
from ql3_import_audit._audit import run_audit
from ql3_import_audit._cli import main
from ql3_import_audit._contracts import existing_rooms
from ql3_import_audit._layout import ROOMS, load_workspace

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


def test_every_room_of_the_real_packages_exists() -> None:
    """Each room `ROOMS` names is a subpackage of the real tree, so none drops out of a contract.

    The contracts keep only the rooms a tree holds (fixture trees hold none); a room renamed or
    removed without its `ROOMS` entry would otherwise stop being checked in silence.
    """
    workspace = load_workspace(REPO_ROOT)
    packages = {package.import_name: package for package in workspace.packages}
    for name, layers in ROOMS.items():
        if name not in packages:
            continue  # a fixture package named only for the audit's own tests
        assert existing_rooms(packages[name]) == layers, name
