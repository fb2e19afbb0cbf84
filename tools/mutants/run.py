"""Mutation evidence: generated mutants of the real code, each judged by assertions of real tests.

Run through nox, which installs the product wheels, the test kit and the `mutants` dependency
group (cosmic-ray, coverage) into the session:

    uv run nox -s mutants                  # CI: the fixed sample and the named mutants
    uv run nox -s mutants -- --all         # the full run: map the tests anew, every mutant,
                                           # rewrite docs/MUTANTS.md and the EVIDENCE.md block
    uv run nox -s mutants -- --module _decision.py --module sql/commit_decisions.sql --report
    uv run nox -s mutants -- --id py:_decision:1a2b3c4d     # one mutant, printed
    uv run nox -s mutants -- --named replica-wakes-300-ms-late   # one named mutant
    uv run nox -s mutants -- --map-only    # map the tests anew (tools/mutants/test_map.json)

Generation: `generate.py` (cosmic-ray for the Python modules of `mutants.toml`, why cosmic-ray
and not mutmut is in `py_mutants.py`; our token-based SQL operators in `sql_mutants.py`). Each
mutant replaces its one file in the session's installed real wheels (`execute.py`), judged by the
tests the map (`selection.py`, `test_map.json`) says run its line or send its statement, and
classified by the pytest plugin (`plugin/ql3_mutants_plugin.py`): caught only on a failed
assertion; invalid on a build, import, SQL or crash error; timeout apart. A test that kills a
mutant is run once on the unmutated wheels (the control, on demand): a kill by a test that fails
anyway is invalid, so "caught" means the mutation was noticed. The map run of `--all` is the
control of every test at once (a test failing there is left out of the map).

Before any mutant runs, every test id the chosen mutants (and the named ones) would run is
checked against the test files: a stale map (a test renamed or deleted since it was made) stops
the run with status 2, naming the ids, because pytest given a missing id runs nothing. A
selection that ran no test is `untested`, never `survived`.

Exit status: 0 when the control passed and no selected valid mutant survived, timed out or went
untested without an entry in `equivalent.toml`, and every named mutant (`catalog.toml`) was
caught; `--all` reports and exits 0 unless the control failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import choose
import generate
import report
import selection
from execute import Outcome, Wheels, judge, pytest_command, run_pytest
from model import ROOT, VALID, Mutant, Verdict, describe

if TYPE_CHECKING:
    from collections.abc import Callable

    import catalog

DOCS = ROOT / "docs"


def commit() -> str:
    """Return the short hash of HEAD, marked `+changes` if the product tree differs from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "packages"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    return f"{head}+changes" if dirty else head


def make_map(config: generate.Config, only: list[str] | None = None) -> selection.TestMap:
    """Run every test folder once on the unmutated wheels, recording coverage per test.

    With `only` (test files), run just those and merge them into the stored map: the tests a
    change added or renamed join the map in minutes instead of a whole map run.
    """
    outputs = []
    for suite in config.suites:
        started = time.monotonic()
        chosen = [path for path in only or [] if path.startswith(f"{suite}/")]
        if only and not chosen:
            continue
        command = pytest_command(suite, chosen or [suite], 600)
        record, tail = run_pytest(command, "MUTANTS_QL3_MAP", 3 * 3600)
        if record is None:
            raise SystemExit(f"mutants: the map run of {suite} did not finish:\n{tail}")
        outputs.append(Path(str(record["folder"])))
        print(f"mutants: mapped {suite} in {time.monotonic() - started:.0f} s", flush=True)
    earlier = json.loads(selection.MAP_FILE.read_text()) if only else None
    data = selection.build(outputs, commit(), earlier)
    selection.MAP_FILE.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    failed = data["failed_unmutated"]
    print(f"mutants: map of {len(data['tests'])} tests; {len(failed)} failed unmutated: {failed}")
    return selection.TestMap(data)


def passes_unmutated(test: str, judges: dict[str, bool], config: generate.Config) -> bool:
    """Return whether a killing test passes on the unmutated wheels (run once per test).

    The control on demand: only a test that killed a mutant is run unmutated, so a kill by a
    test that fails anyway does not count, without running every selected test first.
    """
    if test not in judges:
        outcome = judge([test], config.suites, config.test_timeout_s, 600)
        judges[test] = not outcome.findings and outcome.tests_run > 0
    return judges[test]


def control(tests: list[str], config: generate.Config, suites: tuple[str, ...]) -> bool:
    """Require every selected test to pass on the unmutated wheels."""
    if not tests:
        return True
    outcome = judge(sorted(set(tests)), suites, config.test_timeout_s, 3600)
    print(f"mutants: control of {outcome.tests_run} tests: {len(outcome.findings)} failures")
    for finding in outcome.findings:
        print(f"mutants:   {finding['test']}: {finding['exception']}: {finding['message']}")
    return not outcome.findings and outcome.tests_run > 0


def test_bounds(
    tests: list[str], test_map: selection.TestMap, config: generate.Config
) -> dict[str, float]:
    """Return each selected test's pytest-timeout bound: a multiple of its mapped duration."""
    return {
        test: min(
            float(config.test_timeout_s),
            config.test_timeout_floor_s + config.test_timeout_factor * test_map.duration(test),
        )
        for test in tests
    }


def selection_budget(
    tests: list[str], test_map: selection.TestMap, config: generate.Config
) -> float:
    """Return the bound of one mutant's selection: a multiple of its unmutated time, capped.

    A mutant that loops forever (at import, where pytest-timeout is not armed yet, or in every
    test) would otherwise hold the run for the whole ceiling; one that only slows the tests
    down by less than the factor still gets judged by its assertions.
    """
    mapped = sum(test_map.duration(test) for test in tests)
    return min(
        float(config.mutant_timeout_s),
        config.selection_floor_s + config.selection_factor * mapped,
    )


def run_generated(
    mutant: Mutant,
    tests: list[str],
    wheels: Wheels,
    config: generate.Config,
    budgets: tuple[float, dict[str, float]],
) -> tuple[Mutant, Outcome]:
    """Realize, build, install and judge one generated mutant; restore its package.

    `budgets` is the selection's bound and each test's own (`test_bounds`).
    """
    budget_s, bounds = budgets
    mutant = generate.realize(mutant)
    if mutant.edit is None:
        return mutant, Outcome(Verdict.INVALID, "cosmic-ray made no change at this site")
    if not tests:
        return mutant, Outcome(Verdict.UNTESTED, "no test runs this line or statement")
    original = (ROOT / mutant.file).read_text()
    try:
        wheels.install_mutated(mutant.file, mutant.edit.apply(original))
    except subprocess.CalledProcessError as exc:
        return mutant, Outcome(Verdict.INVALID, f"build failed: {str(exc.stderr)[-200:]}")
    try:
        return mutant, judge(tests, config.suites, config.test_timeout_s, budget_s, bounds)
    finally:
        wheels.restore(mutant.package)


def run_named(entries: list[catalog.Named], wheels: Wheels) -> list[str]:
    """Run the named mutants (control first); return their table rows."""
    rows: list[str] = []
    for suite in dict.fromkeys(entry.suite for entry in entries):
        tests = [t for e in entries if e.suite == suite for t in e.tests]
        if not control(tests, generate.load_config(), (suite,)):
            raise SystemExit(f"mutants: the named mutants' {suite} tests fail unmutated")
    for entry in entries:
        wheels.install_mutated(entry.file, entry.mutated())
        try:
            outcome = judge(entry.tests, (entry.suite,), 300, 1800)
        finally:
            wheels.restore(entry.file.split("/")[1])
        print(f"mutants: {entry.name}: {outcome.verdict.value} {outcome.reason}", flush=True)
        judged = f"`{outcome.reason}`" if outcome.verdict is Verdict.CAUGHT else outcome.reason
        rows.append(
            f"| `{entry.name}` | {entry.what} | `{entry.file.split('/src/')[-1]}` |"
            f" {outcome.verdict.value} | {report._cell(judged)} | {outcome.seconds:.0f} |"  # noqa: SLF001
        )
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="map anew and run every mutant")
    parser.add_argument("--module", action="append", help="run this module's mutants")
    parser.add_argument("--id", action="append", help="run this mutant")
    parser.add_argument("--limit", type=int, help="with --module: at most this many")
    parser.add_argument(
        "--per-module",
        type=int,
        help=(
            "with --module: the next this many of each module in the seeded order (a uniform"
            " sample), leaving out those with a row in a --keep record"
        ),
    )
    parser.add_argument(
        "--goal-sample",
        type=int,
        help=(
            "the next this many of the goal modules' one seeded order (a uniform sample of"
            " them all), leaving out those with a row in a --keep record"
        ),
    )
    parser.add_argument("--map", action="store_true", help="map the tests anew first")
    parser.add_argument("--map-only", action="store_true", help="map the tests anew and stop")
    parser.add_argument(
        "--test-map", type=Path, default=selection.MAP_FILE, help="read this map instead"
    )
    parser.add_argument(
        "--map-file", action="append", help="with --map-only: map only this test file, merged"
    )
    parser.add_argument("--minutes", type=float, help="start no mutant after this many minutes")
    parser.add_argument("--no-named", action="store_true", help="skip catalog.toml")
    parser.add_argument(
        "--named", action="append", help="run only this named mutant (catalog.toml)"
    )
    parser.add_argument("--report", action="store_true", help="write docs/ for this selection")
    parser.add_argument("--evidence", type=Path, default=DOCS / "EVIDENCE.md")
    parser.add_argument(
        "--keep",
        type=Path,
        action="append",
        help="report also the rows of this earlier run's record not rerun now (repeatable)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=selection.MAP_FILE.with_name("last-run.json"),
        help="where this run's record goes (rows, commit, selection), for a later --keep",
    )
    return parser.parse_args(argv)


def run_chosen(
    chosen: list[Mutant],
    selected: dict[str, list[str]],
    wheels: Wheels,
    config: generate.Config,
    test_map: selection.TestMap,
    *,
    minutes: float | None,
    checkpoint: Callable[[list[report.Row]], None] = lambda _rows: None,
) -> tuple[list[report.Row], str]:
    """Run the chosen mutants in order; return their rows and why the run stopped early, if so.

    `checkpoint` gets the rows so far after each mutant: a run stopped from outside (a killed
    session, a machine that goes away) keeps what it judged, in `<out>.partial.json` beside its
    `--out` record (a `--keep` input for the next run).
    """
    judges: dict[str, bool] = {}
    rows: list[report.Row] = []
    started = time.monotonic()
    for number, generated in enumerate(chosen, 1):
        if minutes and time.monotonic() - started > minutes * 60:
            return rows, f"; stopped by --minutes {minutes:g} after {number - 1} mutants"
        tests = selected[generated.id]
        budgets = (selection_budget(tests, test_map, config), test_bounds(tests, test_map, config))
        mutant, outcome = run_generated(generated, tests, wheels, config, budgets)
        if outcome.verdict is Verdict.CAUGHT and not passes_unmutated(
            outcome.reason, judges, config
        ):
            outcome = Outcome(
                Verdict.INVALID, f"{outcome.reason} fails unmutated too", outcome.seconds
            )
        original = (ROOT / mutant.file).read_text()
        before, after = describe(mutant.edit, original) if mutant.edit else ("", "")
        rows.append(
            report.Row(
                mutant.id, mutant.module, mutant.line, mutant.operator, before, after,
                outcome.verdict, outcome.reason, outcome.seconds, len(selected[mutant.id]),
            )
        )  # fmt: skip
        print(
            f"mutants: [{number}/{len(chosen)}] {mutant.id} {mutant.module}:{mutant.line}"
            f" {mutant.operator}: {outcome.verdict.value} in {outcome.seconds:.0f} s"
            f" ({len(selected[mutant.id])} tests) {outcome.reason[:160]}",
            flush=True,
        )
        checkpoint(rows)
    return rows, ""


def write_record(
    path: Path, built_from: str, described: str, rows: list[report.Row], named: list[str]
) -> None:
    """Write a run's record (commit, selection, rows, named rows), the input of a later --keep."""
    rows_out = [{**row.__dict__, "verdict": row.verdict.value} for row in rows]
    record = {"commit": built_from, "selection": described, "rows": rows_out, "named": named}
    path.write_text(json.dumps(record, indent=1))


def main(argv: list[str] | None = None) -> int:
    """Map (if asked), check the map, run the chosen mutants and the named ones, report."""
    args = parse(argv)
    built_from = commit()  # the wheels are built from the tree as it is now, not as it ends
    config = generate.load_config()
    equivalents = report.load_equivalents()
    every = generate.generate_all(config)  # once: the choice and the report's order share it
    chosen, described = choose.choose(args, config, every)
    print(f"mutants: {described}", flush=True)
    mapping = args.all or args.map or args.map_only
    wheels = Wheels() if mapping else None
    if wheels is not None:
        wheels.restore()
    test_map = make_map(config, args.map_file) if mapping else selection.TestMap.load(args.test_map)
    if args.map_only:
        return 0
    selected = {m.id: test_map.select(m) for m in chosen}
    partial = (args.id or args.module or args.goal_sample) and not args.report
    named_entries = [] if args.no_named or partial else choose.pick(args)
    if choose.stale_ids(selected, named_entries):
        return 2
    if wheels is None:
        wheels = Wheels()
        wheels.restore()

    # Beside `--out`, never over it: `--out` may be one of the `--keep` records, read at the end.
    partial_path = args.out.with_name(f"{args.out.stem}.partial.json")

    def checkpoint(done: list[report.Row]) -> None:
        partial = f"{described}; stopped after {len(done)} of {len(chosen)} (written as it ran)"
        write_record(partial_path, built_from, partial, done, [])

    rows, stopped = run_chosen(
        chosen, selected, wheels, config, test_map, minutes=args.minutes, checkpoint=checkpoint
    )
    named = run_named(named_entries, wheels) if named_entries else []
    wheels.restore()
    options = " ".join(a for a in (argv or sys.argv[1:]) if not a.startswith("--evidence"))
    options = options.replace(str(args.evidence), "").strip()
    described += stopped
    if args.keep:
        rows, described, earlier_named = choose.keep(
            args.keep, rows, described, {m.id for m in every}
        )
        named = named or earlier_named
    context = {
        "command": f"nox -s mutants -- {options}" if options else "nox -s mutants",
        "commit": built_from,
        "selection": described,
        "control": "all (the map run)" if args.all else "each killing test, checked once",
        "goal": ",".join(config.goal_modules),
        "percent": str(config.goal_percent),
    }
    order = choose.seeded_ids(config, every)
    goal_order = choose.goal_order(config, every)
    if args.all or args.report:
        (DOCS / "MUTANTS.md").write_text(
            report.mutants_page(rows, equivalents, context, order=order, goal_order=goal_order)
        )
        report.write_block(
            args.evidence,
            report.evidence_block(
                rows, equivalents, context, named, order=order, goal_order=goal_order
            ),
        )
    write_record(args.out, context["commit"], described, rows, named)
    partial_path.unlink(missing_ok=True)
    failing = [
        r.id for r in rows
        if r.verdict in VALID and r.verdict is not Verdict.CAUGHT and r.id not in equivalents
    ]  # fmt: skip
    named_failing = [row for row in named if "| caught |" not in row]
    for line in report.module_table(rows, equivalents, config.goal_modules, order, goal_order):
        print(line)
    print(f"mutants: not caught and not explained: {len(failing)} {' '.join(failing)}")
    if args.all:
        return 0
    return 1 if failing or named_failing else 0


if __name__ == "__main__":
    sys.exit(main())
