"""Build a mutant into a real wheel, install it over the session's, run its tests, judge it.

The product is tested as it ships: the mutated package is copied (sources only), the one edit
applied, the wheel built with `uv build --no-sources` and installed with `--no-deps` over the
session's own; the other packages and the test kit stay as installed. After the mutant, the
package's unmutated wheel (built once) goes back. Tests run from the real tree, one pytest
process per test folder (each folder has its own helpers and conftest), under the plugin's
verdict mode; the first kill ends the mutant.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from model import ROOT, Verdict

PACKAGES = ("runtime-core", "cluster-postgres", "cluster-control")
PLUGIN_DIR = Path(__file__).with_name("plugin")
PLUGIN = "ql3_mutants_plugin"
# The plugin's bound (`_ERRORS_ENOUGH`): errors that are no assertion, in this many test files,
# end a selection.
ERRORS_ENOUGH = 3


@dataclass
class Outcome:
    """What running one mutant's selection found."""

    verdict: Verdict
    reason: str = ""  # the killing test, or why the mutant is invalid / timed out
    seconds: float = 0.0
    tests_run: int = 0
    findings: list[dict[str, str]] = field(default_factory=list)


def build_wheel(source: Path, package: str, dist: Path) -> Path:
    """Build one package's wheel from `source` (a tree with packages/<package>)."""
    before = set(dist.glob("*.whl"))
    subprocess.run(
        ["uv", "build", str(source / "packages" / package), "--wheel", "--no-sources", "-q",
         "-o", str(dist)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    built = sorted(set(dist.glob("*.whl")) - before) or sorted(dist.glob("*.whl"))
    return built[-1]


def install(*wheels: Path) -> None:
    """Install wheels over the current environment without touching their dependencies."""
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", sys.executable, "--no-deps", "--reinstall",
         *(str(wheel) for wheel in wheels)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip


class Wheels:
    """The unmutated wheels, built once from the tree, and mutated builds of one package."""

    def __init__(self) -> None:
        self.dist = Path(tempfile.mkdtemp(prefix="ql3-mutants-wheels-"))
        self.pristine = {
            package: build_wheel(ROOT, package, self.dist / package) for package in PACKAGES
        }

    def restore(self, *packages: str) -> None:
        """Install the unmutated wheels of `packages` (all when none given)."""
        install(*(self.pristine[p] for p in packages or PACKAGES))

    def install_mutated(self, file: str, text: str) -> None:
        """Build the package holding `file` with `text` as its content and install it."""
        package = file.split("/")[1]
        scratch = Path(tempfile.mkdtemp(prefix="ql3-mutant-"))
        try:
            shutil.copytree(
                ROOT / "packages" / package,
                scratch / "packages" / package,
                ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc"),
            )
            (scratch / file).write_text(text)
            out = scratch / "dist"
            out.mkdir()
            install(build_wheel(scratch, package, out))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def suite_of(test: str, suites: tuple[str, ...]) -> str:
    """Return the test folder a test id belongs to."""
    for suite in suites:
        if test.startswith(f"{suite}/"):
            return suite
    raise ValueError(f"mutants: test {test!r} is in no configured folder")


def pytest_command(suite: str, tests: list[str], timeout_s: int) -> list[str]:
    """Return the command running `tests` of one folder the way the package sessions do."""
    return [
        sys.executable, "-m", "pytest", *tests, "-o", f"pythonpath={ROOT / suite}",
        "-o", f"timeout={timeout_s}", "-p", PLUGIN, "-p", "no:cacheprovider",
        "-p", "no:randomly", "-q", "--no-header", "-rN",
    ]  # fmt: skip


def run_pytest(
    command: list[str], env_name: str, budget_s: float
) -> tuple[dict[str, object] | None, str]:
    """Run pytest with the plugin writing to a temp file; return its record and the output tail."""
    with tempfile.TemporaryDirectory(prefix="ql3-mutants-run-") as folder:
        out = Path(folder) / "out"
        if env_name == "MUTANTS_QL3_MAP":
            out.mkdir()
        env = {
            **os.environ,
            env_name: str(out),
            "PYTHONPATH": os.pathsep.join(
                filter(None, (str(PLUGIN_DIR), os.environ.get("PYTHONPATH")))
            ),
        }
        try:
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True,
                timeout=max(budget_s, 1), check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None, "timeout"
        tail = (done.stdout[-3000:] + done.stderr[-2000:]).strip()
        if env_name == "MUTANTS_QL3_MAP":
            kept = Path(tempfile.mkdtemp(prefix="ql3-mutants-map-"))
            shutil.copytree(out, kept, dirs_exist_ok=True)
            return {"folder": str(kept), "exitstatus": done.returncode}, tail
        if not out.exists():
            return None, tail
        return json.loads(out.read_text()), tail


def judge(tests: list[str], suites: tuple[str, ...], timeout_s: int, budget_s: float) -> Outcome:
    """Run the selection folder by folder (fastest folder first); stop at the first kill."""
    started = time.monotonic()
    groups: dict[str, list[str]] = {}
    for test in tests:
        groups.setdefault(suite_of(test, suites), []).append(test)
    findings: list[dict[str, str]] = []
    ran = 0
    for suite, selected in groups.items():
        left = budget_s - (time.monotonic() - started)
        record, tail = run_pytest(
            pytest_command(suite, selected, timeout_s), "MUTANTS_QL3_VERDICT", left
        )
        if record is None:
            verdict = Verdict.TIMEOUT if tail == "timeout" else Verdict.INVALID
            reason = "the selection ran past its bound" if tail == "timeout" else _last_line(tail)
            return Outcome(verdict, reason, time.monotonic() - started, ran, findings)
        ran += int(str(record.get("ran", 0)))
        found = record.get("findings", [])
        findings += found if isinstance(found, list) else []
        if any(f["category"] in ("assertion", "sql") for f in findings):
            break
        if len({f["test"].split("::")[0] for f in findings if f["category"] == "error"}) >= (
            ERRORS_ENOUGH
        ):
            # The plugin stopped this folder at errors in a third file: the mutant breaks what it
            # touches, and the next folder's tests (services waiting on it) would only hang.
            break
    return _verdict(findings, time.monotonic() - started, ran)


def _verdict(findings: list[dict[str, str]], seconds: float, ran: int) -> Outcome:
    """Decide: an assertion kills; else a timeout; else a SQL error or crash is invalid.

    A selection that ran no test judged nothing: `untested`, never `survived` (pytest runs
    nothing when one id of its arguments no longer exists, so a stale id must not pass for a
    survivor, nor for a control that passed).
    """
    for category, verdict in (
        ("assertion", Verdict.CAUGHT),
        ("timeout", Verdict.TIMEOUT),
        ("sql", Verdict.INVALID),
        ("error", Verdict.INVALID),
    ):
        first = next((f for f in findings if f["category"] == category), None)
        if first is not None:
            reason = first["test"] if verdict is Verdict.CAUGHT else _describe(first)
            return Outcome(verdict, reason, seconds, ran, findings)
    if ran == 0:
        return Outcome(Verdict.UNTESTED, "the selection ran no test", seconds, ran, findings)
    return Outcome(Verdict.SURVIVED, "", seconds, ran, findings)


def _describe(finding: dict[str, str]) -> str:
    kind = {"sql": "SQL error", "timeout": "pytest-timeout", "error": "error"}[finding["category"]]
    where = f"{finding['when']} of {finding['test']}"
    return f"{kind} in {where}: {finding['exception']}: {finding['message'][:160]}"


def _last_line(tail: str) -> str:
    lines = [line for line in tail.splitlines() if line.strip()]
    return f"pytest crashed: {lines[-1][:200]}" if lines else "pytest crashed without output"
