"""The command line: output format, summary line and exit codes."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from fix_trees import FIXTURES
from ql3_import_audit._cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_findings_print_as_file_line_rule_detail(capsys: pytest.CaptureFixture[str]) -> None:
    """Each finding is one `file:line: rule: detail` line with a path relative to the root."""
    main(["--root", str(FIXTURES / "unused")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("packages/cluster-postgres/pyproject.toml:6: unused-dependency: ")
    assert lines[-1].startswith("ql3-import-audit: 1 finding(s) in 1 package(s)")


def test_clean_tree_prints_only_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """A clean tree prints a single summary line saying so."""
    assert main(["--root", str(FIXTURES / "clean")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ql3-import-audit: clean in 2 package(s)")


def test_root_without_packages_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A --root with no packages/ folder exits 2 and names the root."""
    assert main(["--root", str(FIXTURES)]) == 2
    assert "no packages/ folder" in capsys.readouterr().err


def test_unknown_option_is_a_usage_error() -> None:
    """An unknown option exits 2 through argparse."""
    with pytest.raises(SystemExit) as raised:
        main(["--no-such-option"])
    assert raised.value.code == 2


def test_console_script_runs_from_the_environment() -> None:
    """The installed `ql3-import-audit` script audits a tree and exits with its verdict."""
    script = shutil.which("ql3-import-audit")
    assert script is not None, "ql3-import-audit is not on PATH: run `uv sync --all-packages`"
    result = subprocess.run(
        [script, "--root", str(FIXTURES / "edge")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "edge-import" in result.stdout


def test_unparsable_file_stops_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source file with a syntax error exits 2 and names the file and line."""
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "unused", tree)
    broken = tree / "packages/cluster-postgres/src/ql3_cluster_postgres/_broken.py"
    broken.write_text("x = 1\ndef (:\n", encoding="utf-8")
    assert main(["--root", str(tree)]) == 2
    assert "_broken.py:2: cannot parse" in capsys.readouterr().err
