"""Mutation evidence (issue 10.6): named mutants of the real code, each caught by focused tests.

A negative control made of rows planted by SQL proves the checker reads rows; it does not prove
that the tests notice when the *code* goes wrong. So for each mutant of `catalog.toml`:

1. copy the product packages to a scratch folder and apply one textual change, which must match
   exactly once (a stale catalog entry fails the run instead of silently testing nothing);
2. build the three product wheels from the copy (`uv build --no-sources`) and install them over
   the session's own (`--no-deps`: every dependency is already there, the test kit
   `ql3-testkit` included, which is never mutated and stays installed as the session left it);
3. run the mutant's focused tests from the real tree and require them to FAIL (pytest exit 1).

A control run first installs the unmutated wheels and requires every selection to PASS, so
"caught" means the mutation was noticed, not that a test was broken to begin with. The kill table
is written between markers into docs/EVIDENCE.md. Exit status: 0 only if the control passed and
every mutant was caught.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CATALOG = Path(__file__).with_name("catalog.toml")
PRODUCT = ("runtime-core", "cluster-postgres", "cluster-control")
START = "<!-- mutants:start -->"
END = "<!-- mutants:end -->"
# A mutant may make a test wait for something that never happens; the selection's own bound.
TEST_TIMEOUT_S = 180


@dataclass(frozen=True)
class Mutant:
    """One named change to the product and the tests that must notice it."""

    name: str
    what: str
    file: str
    find: str
    replace: str
    suite: str
    select: tuple[str, ...]

    def command(self) -> list[str]:
        """Return the pytest command of this mutant's focused tests (run from the root)."""
        return pytest_command(self.suite, self.select)


@dataclass
class Result:
    """What happened to one mutant."""

    mutant: Mutant
    exit_code: int
    seconds: float
    failed_tests: tuple[str, ...]

    @property
    def caught(self) -> bool:
        """Exit 1 means tests failed; 0 survived; other codes are harness errors, not kills."""
        return self.exit_code == 1


def pytest_command(suite: str, select: tuple[str, ...]) -> list[str]:
    """Build the pytest command line the package sessions use, for a selection of one suite."""
    tests = ROOT / suite
    return [
        sys.executable, "-m", "pytest", *(str(tests / item) for item in select),
        "-o", f"pythonpath={tests}", "-o", f"timeout={TEST_TIMEOUT_S}",
        "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-x", "--no-header", "-rf",
    ]  # fmt: skip


def load_catalog(path: Path = CATALOG) -> list[Mutant]:
    """Read the catalog; every entry must name its file, its change and its tests."""
    entries = tomllib.loads(path.read_text())["mutant"]
    mutants = [
        Mutant(
            name=entry["name"],
            what=entry["what"],
            file=entry["file"],
            find=entry["find"],
            replace=entry["replace"],
            suite=entry["suite"],
            select=tuple(entry["select"]),
        )
        for entry in entries
    ]
    names = [mutant.name for mutant in mutants]
    if len(set(names)) != len(names):
        raise SystemExit(f"mutants: duplicate names in {path}")
    return mutants


def scratch_copy() -> Path:
    """Copy the product packages (sources only) into a fresh scratch folder."""
    scratch = Path(tempfile.mkdtemp(prefix="ql3-mutant-"))
    for package in PRODUCT:
        shutil.copytree(
            ROOT / "packages" / package,
            scratch / "packages" / package,
            ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc"),
        )
    return scratch


def apply(mutant: Mutant, scratch: Path) -> None:
    """Apply the mutant's change to the scratch copy; it must match exactly once."""
    target = scratch / mutant.file
    text = target.read_text()
    matches = text.count(mutant.find)
    if matches != 1:
        raise SystemExit(
            f"mutants: {mutant.name}: {mutant.find!r} occurs {matches} times in {mutant.file};"
            " the catalog no longer matches the code"
        )
    target.write_text(text.replace(mutant.find, mutant.replace))


def build_and_install(source: Path) -> None:
    """Build the product wheels from `source` and install them over the current environment."""
    dist = Path(tempfile.mkdtemp(prefix="ql3-mutant-wheels-"))
    for package in PRODUCT:
        subprocess.run(
            ["uv", "build", str(source / "packages" / package), "--wheel", "--no-sources",
             "-q", "-o", str(dist)],
            check=True,
        )  # fmt: skip
    wheels = sorted(str(path) for path in dist.glob("*.whl"))
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", sys.executable, "--no-deps", "--reinstall",
         *wheels],
        check=True,
    )  # fmt: skip
    shutil.rmtree(dist, ignore_errors=True)


def run_selection(command: list[str]) -> tuple[int, float, tuple[str, ...]]:
    """Run one pytest selection; return its exit code, duration and the failed test ids."""
    started = time.monotonic()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    failed = tuple(
        line.split(" ", 2)[1]
        for line in completed.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    )
    if completed.returncode not in (0, 1):
        print(completed.stdout[-4000:], completed.stderr[-4000:], sep="\n")
    return completed.returncode, seconds, failed


def control(mutants: list[Mutant]) -> bool:
    """Install the unmutated wheels and require every mutant's selection to pass."""
    build_and_install(ROOT)
    by_suite: dict[str, list[str]] = {}
    for mutant in mutants:
        by_suite.setdefault(mutant.suite, []).extend(mutant.select)
    ok = True
    for suite, select in by_suite.items():
        code, seconds, failed = run_selection(pytest_command(suite, tuple(dict.fromkeys(select))))
        print(f"mutants: control {suite}: exit {code} in {seconds:.0f} s {' '.join(failed)}")
        ok = ok and code == 0
    return ok


def run_mutant(mutant: Mutant) -> Result:
    """Build, install and test one mutant."""
    scratch = scratch_copy()
    try:
        apply(mutant, scratch)
        build_and_install(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    code, seconds, failed = run_selection(mutant.command())
    result = Result(mutant, code, seconds, failed)
    verdict = "caught" if result.caught else f"NOT caught (exit {code})"
    print(f"mutants: {mutant.name}: {verdict} in {seconds:.0f} s by {' '.join(failed) or '-'}")
    return result


def kill_table(results: list[Result], *, control_passed: bool) -> str:
    """Render the kill table for docs/EVIDENCE.md."""
    lines = [
        START,
        "## Mutants of the real code",
        "",
        (
            "Written by `nox -s mutants` (`tools/mutants/`); do not edit by hand. Each mutant is"
            " one named change to the product source, built into real wheels; its focused tests"
            " must fail. The unmutated wheels passed the same selections first:"
            f" {'yes' if control_passed else 'NO'}."
        ),
        "",
        "| mutant | what it breaks | file | caught by | verdict | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        mutant = result.mutant
        caught_by = "<br>".join(f"`{test}`" for test in result.failed_tests) or "-"
        verdict = "caught" if result.caught else f"**survived** (exit {result.exit_code})"
        lines.append(
            f"| `{mutant.name}` | {mutant.what} | `{mutant.file.split('/src/')[-1]}` |"
            f" {caught_by} | {verdict} | {result.seconds:.0f} |"
        )
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_evidence(path: Path, table: str) -> None:
    """Replace the mutants block of `path` (or append one), leaving the rest of the file alone."""
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        text = head + table.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + table
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run the control and every selected mutant; write the kill table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--evidence", type=Path, help="write the kill table into this file")
    args = parser.parse_args(argv)
    mutants = load_catalog()
    if args.names:
        unknown = sorted(set(args.names) - {mutant.name for mutant in mutants})
        if unknown:
            raise SystemExit(f"mutants: unknown names {unknown}")
        mutants = [mutant for mutant in mutants if mutant.name in args.names]
    control_passed = control(mutants)
    if not control_passed:
        print("mutants: the unmutated wheels fail the selections; fix the tests first")
        return 1
    results = [run_mutant(mutant) for mutant in mutants]
    build_and_install(ROOT)  # leave the environment as it was
    if args.evidence is not None and not args.names:
        write_evidence(args.evidence, kill_table(results, control_passed=control_passed))
    survivors = [result.mutant.name for result in results if not result.caught]
    print(f"mutants: {len(results) - len(survivors)} of {len(results)} caught")
    if survivors:
        print(f"mutants: survived: {', '.join(survivors)}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
