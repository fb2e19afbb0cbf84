"""Each planted violation in a fixture tree is reported with its exact file, line and rule."""

from __future__ import annotations

import pytest
from fix_trees import FIXTURES, TREES, expected
from ql3_import_audit._audit import run_audit
from ql3_import_audit._cli import main
from ql3_import_audit._clock import check_clock
from ql3_import_audit._layout import load_workspace

CLOCK = FIXTURES / "clock"
EVASIONS = "packages/runtime-core/src/ql3_runtime_core/evasions"
# Modules of the evasions folder that plant nothing: the look-alikes and a clock-free base class.
NOT_PLANTED = ("__init__.py", "negatives.py", "stamp_base.py")
EVASION_FILES = sorted(
    path.name for path in (CLOCK / EVASIONS).glob("*.py") if path.name not in NOT_PLANTED
)


@pytest.fixture(scope="module")
def flow_findings() -> dict[tuple[str, int], str]:
    """Return the clock pass's own findings on the clock tree (ruff's run left out)."""
    return {(f.path, f.line): f.detail for f in check_clock(load_workspace(CLOCK))}


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
    """The fixture trees together plant at least one violation of each of the eight rules."""
    rules = {rule for name in TREES for _, _, rule in expected(FIXTURES / name)}
    assert rules == {
        "forbidden-direction",
        "edge-import",
        "undeclared-dependency",
        "unused-dependency",
        "rule-zero",
        "independent-checker",
        "room-import",
        "import-cycle",
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


def test_tests_may_import_the_test_kit_they_declare() -> None:
    """cluster-postgres tests import ql3_testkit (listed in their test group) without a finding."""
    test_file = FIXTURES / "testkit/packages/cluster-postgres/tests/test_with_kit.py"
    assert "from ql3_testkit import ThrowawayCluster\n" in test_file.read_text(encoding="utf-8")
    findings, audited = run_audit(FIXTURES / "testkit")
    assert audited == 3
    assert ("packages/cluster-postgres/tests/test_with_kit.py", 3) not in {
        (finding.path, finding.line) for finding in findings
    }


@pytest.mark.parametrize("name", EVASION_FILES)
def test_each_evasion_is_caught_by_the_flow_pass(
    name: str, flow_findings: dict[tuple[str, int], str]
) -> None:
    """The AST pass alone reports exactly the `# expect:` lines of one evasion module."""
    relative = f"{EVASIONS}/{name}"
    planted = {(path, line) for path, line, _ in expected(CLOCK) if path == relative}
    assert planted, f"{relative} plants nothing"
    assert {place for place in flow_findings if place[0] == relative} == planted


@pytest.mark.parametrize("name", ["negatives.py", "stamp_base.py"])
def test_look_alikes_are_not_reported(name: str, flow_findings: dict[tuple[str, int], str]) -> None:
    """A local `now`, fromtimestamp with a timestamp and aliased monotonic clocks pass."""
    assert not [place for place in flow_findings if place[0] == f"{EVASIONS}/{name}"]


def test_subclass_reads_are_named_after_the_inherited_clock(
    flow_findings: dict[tuple[str, int], str],
) -> None:
    """`Stamp.utcnow()` on a subclass imported from another module names datetime.utcnow."""
    detail = flow_findings[(f"{EVASIONS}/stamp_user.py", 12)]
    assert detail.startswith("datetime.datetime.utcnow is the node wall clock")


def test_a_subclass_in_a_test_file_is_caught(
    flow_findings: dict[tuple[str, int], str],
) -> None:
    """A datetime subclass (over an alias) calling now() in a tests folder is reported."""
    assert ("packages/runtime-core/tests/test_subclass_clock.py", 13) in flow_findings
