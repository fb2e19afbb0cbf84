"""The repository itself passes its own audit."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fix_trees import REPO_ROOT
from ql3_import_audit._cli import main
from ql3_import_audit._contracts import existing_rooms
from ql3_import_audit._layout import ROOMS, load_workspace

if TYPE_CHECKING:
    import pytest


def test_repository_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    """`ql3-import-audit --root <repo>` exits 0: every package's src and tests obey the rules.

    The fixture trees hold planted violations on purpose: auditing the repository must never
    report one of them (checked first, so a leak is named as such, not as a failing package).
    One audit of the whole tree serves both checks (it takes half a minute).
    """
    assert (REPO_ROOT / "packages").is_dir(), REPO_ROOT
    code = main(["--root", str(REPO_ROOT)])
    out = capsys.readouterr().out
    assert "tools/import-audit/tests/fixtures/" not in out, out
    audited = re.search(r"in (\d+) package\(s\)", out)
    assert audited is not None, out
    assert int(audited.group(1)) >= 3, out  # all three wheels were audited, not a subset
    assert code == 0, out


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
