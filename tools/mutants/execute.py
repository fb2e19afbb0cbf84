"""Install a mutant over the session's real wheels, run its tests, judge it.

The product is tested as it ships: the three wheels are built from the tree with `uv build
--no-sources` and installed once; a mutant then replaces the one installed file it changes
(`Wheels`, which says why that equals installing a rebuilt wheel), and the file goes back
after its tests. The other packages and the test kit stay as installed. Tests run from the real
tree, one pytest process per test folder (each folder has its own helpers and conftest), under
the plugin's verdict mode; the first kill ends the mutant.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from model import ROOT, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping

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
    """The unmutated wheels, built once from the tree and installed; mutants swap one file.

    A mutant changes one module or one `.sql` file of a pure-Python wheel (hatchling copies
    `src/<package>` as it is, no build hook), so installing a wheel rebuilt with the change
    writes exactly that file over the installed one. That is what `install_mutated` does,
    directly, in the session's site-packages (and drops the file's bytecode, whose timestamp
    check cannot be trusted within one second); `restore` writes the installed bytes back. A
    build and two installs per mutant took most of its time (20-40 s on 2 busy cores against
    2-4 s of tests); the real wheels are still what every run starts and ends with.
    """

    def __init__(self) -> None:
        self.dist = Path(tempfile.mkdtemp(prefix="ql3-mutants-wheels-"))
        self.pristine = {
            package: build_wheel(ROOT, package, self.dist / package) for package in PACKAGES
        }
        self.site = Path(sysconfig.get_paths()["purelib"])
        self.swapped: dict[Path, bytes] = {}

    def restore(self, *packages: str) -> None:
        """Put back what a mutant swapped; with no package named, reinstall every real wheel."""
        for installed, data in self.swapped.items():
            _write(installed, data)
        self.swapped.clear()
        if not packages:
            install(*self.pristine.values())

    def install_mutated(self, file: str, text: str) -> None:
        """Write `text` over the installed copy of `file` (a path under `packages/*/src/`)."""
        installed = self.site / file.split("/src/", 1)[1]
        if not installed.is_file():
            msg = f"mutants: {file} is not installed at {installed}"
            raise FileNotFoundError(msg)
        self.swapped.setdefault(installed, installed.read_bytes())
        _write(installed, text.encode("utf-8"))


def _write(installed: Path, data: bytes) -> None:
    """Write a module or SQL file and drop its cached bytecode (stale within the same second)."""
    installed.write_bytes(data)
    for cached in installed.parent.glob(f"__pycache__/{installed.stem}.*.pyc"):
        cached.unlink(missing_ok=True)


def suite_of(test: str, suites: tuple[str, ...]) -> str:
    """Return the test folder a test id belongs to."""
    for suite in suites:
        if test.startswith(f"{suite}/"):
            return suite
    raise ValueError(f"mutants: test {test!r} is in no configured folder")


def pytest_command(suite: str, tests: list[str], timeout_s: int) -> list[str]:
    """Return the command running `tests` of one folder the way the package sessions do.

    A folder's `web` tests are left out, as `nox -s cluster_control` leaves them out: they need
    a browser (`nox -s web`), which this session does not install, and judge no mutated module.
    """
    web = ROOT / suite / "web"
    ignore = [f"--ignore={web}"] if web.is_dir() else []
    return [
        sys.executable, "-m", "pytest", *tests, *ignore, "-o", f"pythonpath={ROOT / suite}",
        "-o", f"timeout={timeout_s}", "-p", PLUGIN, "-p", "no:cacheprovider",
        "-p", "no:randomly", "-q", "--no-header", "-rN",
    ]  # fmt: skip


def run_pytest(
    command: list[str],
    env_name: str,
    budget_s: float,
    bounds: Mapping[str, float] | None = None,
) -> tuple[dict[str, object] | None, str]:
    """Run pytest with the plugin writing to a temp file; return its record and the output tail.

    `bounds` (test id -> seconds) gives tests their own pytest-timeout bound (the plugin marks
    them); the others keep the command's.
    """
    with tempfile.TemporaryDirectory(prefix="ql3-mutants-run-") as folder:
        out = Path(folder) / "out"
        if env_name == "MUTANTS_QL3_MAP":
            out.mkdir()
        extra = {}
        if bounds:
            (Path(folder) / "bounds.json").write_text(json.dumps(dict(bounds)))
            extra["MUTANTS_QL3_BOUNDS"] = str(Path(folder) / "bounds.json")
        env = {
            **os.environ,
            **extra,
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


def _after_hang(selected: list[str], found: list[dict[str, str]]) -> list[str]:
    """Return the tests of `selected` after the one the watchdog ended the run in (else none).

    The watchdog ends the whole process at a hung test, so the tests after it never ran; one of
    them may still fail an assertion, which decides the verdict better than the hang does.
    """
    hung = [f["test"].split("[", 1)[0] for f in found if f.get("exception") == "Hung"]
    if not hung or hung[-1] not in selected:
        return []
    return selected[selected.index(hung[-1]) + 1 :]


def judge(
    tests: list[str],
    suites: tuple[str, ...],
    timeout_s: int,
    budget_s: float,
    bounds: Mapping[str, float] | None = None,
) -> Outcome:
    """Run the selection folder by folder, lowest layer first; stop at the first kill.

    The lowest layer's tests (runtime-core's units) judge the code they import directly and take
    seconds; a mutant that breaks it can hang the services of the layers above until their
    watchdogs fire (minutes), so those run only when the layer below caught nothing.

    A test the watchdog finds hung ends its pytest process; the tests after it in the selection
    run in a new one, within the same budget, so a hang early in the order does not hide a kill.
    """
    started = time.monotonic()
    groups: dict[str, list[str]] = {}
    for test in tests:
        groups.setdefault(suite_of(test, suites), []).append(test)
    findings: list[dict[str, str]] = []
    ran = 0
    for suite in sorted(groups, key=suites.index):
        pending = groups[suite]
        while pending:
            left = budget_s - (time.monotonic() - started)
            record, tail = run_pytest(
                pytest_command(suite, pending, timeout_s), "MUTANTS_QL3_VERDICT", left, bounds
            )
            if record is None:
                verdict = Verdict.TIMEOUT if tail == "timeout" else Verdict.INVALID
                reason = (
                    "the selection ran past its bound" if tail == "timeout" else _last_line(tail)
                )
                if findings and verdict is Verdict.TIMEOUT:
                    # The hangs found so far say more than the budget running out.
                    return _verdict(findings, time.monotonic() - started, ran)
                return Outcome(verdict, reason, time.monotonic() - started, ran, findings)
            ran += int(str(record.get("ran", 0)))
            found = record.get("findings", [])
            found = found if isinstance(found, list) else []
            findings += found
            if any(f["category"] in ("assertion", "sql") for f in findings):
                return _verdict(findings, time.monotonic() - started, ran)
            pending = _after_hang(pending, found)
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
