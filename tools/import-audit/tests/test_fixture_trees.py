"""Each planted violation in a fixture tree is reported with its exact file, line and rule."""

from __future__ import annotations

import pytest
from fix_trees import FIXTURES, TREES, expected
from ql3_import_audit._audit import run_audit
from ql3_import_audit._cli import main


@pytest.mark.parametrize("name", TREES)
def test_findings_match_the_planted_markers(name: str) -> None:
    """The audit reports exactly the `# expect:` lines of the tree, nothing more or less."""
    findings, _ = run_audit(FIXTURES / name)
    reported = {(finding.path, finding.line, finding.rule) for finding in findings}
    assert reported == expected(FIXTURES / name)


@pytest.mark.parametrize("name", TREES)
def test_exit_code_follows_the_findings(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The command exits 1 when a tree has any planted violation and 0 for the clean tree."""
    code = main(["--root", str(FIXTURES / name)])
    output = capsys.readouterr().out
    assert code == (1 if expected(FIXTURES / name) else 0), output


def test_every_rule_has_a_tree() -> None:
    """The fixture trees together plant at least one violation of each of the five rules."""
    rules = {rule for name in TREES for _, _, rule in expected(FIXTURES / name)}
    assert rules == {
        "forbidden-direction",
        "edge-import",
        "undeclared-dependency",
        "unused-dependency",
        "rule-zero",
    }


def test_wall_clock_in_a_test_file_is_caught() -> None:
    """A `time.time()` call inside a package's tests folder is a rule-zero finding."""
    findings, _ = run_audit(FIXTURES / "clock")
    assert ("packages/runtime-core/tests/test_clock.py", 7, "rule-zero") in {
        (finding.path, finding.line, finding.rule) for finding in findings
    }


def test_clean_tree_allows_own_private_imports_in_own_tests() -> None:
    """runtime-core's own tests importing `ql3_runtime_core._cron` produce no finding."""
    marker = "from ql3_runtime_core._cron import _helper"
    test_file = FIXTURES / "clean/packages/runtime-core/tests/unit/test_core.py"
    assert marker in test_file.read_text(encoding="utf-8")
    findings, _ = run_audit(FIXTURES / "clean")
    assert findings == []
