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
mutant is built into a real wheel and installed over the session's (`execute.py`), judged by the
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
from typing import Any

import catalog
import generate
import report
import selection
from execute import Outcome, Wheels, judge, pytest_command, run_pytest
from model import ROOT, VALID, Mutant, Verdict, describe

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


def run_generated(
    mutant: Mutant, tests: list[str], wheels: Wheels, config: generate.Config
) -> tuple[Mutant, Outcome]:
    """Realize, build, install and judge one generated mutant; restore its package."""
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
        return mutant, judge(tests, config.suites, config.test_timeout_s, config.mutant_timeout_s)
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


def pick(args: argparse.Namespace) -> list[catalog.Named]:
    """Return the named mutants to run: those of `--named`, or the whole catalog."""
    entries = catalog.load()
    if not args.named:
        return entries
    unknown = set(args.named) - {entry.name for entry in entries}
    if unknown:
        raise SystemExit(f"mutants: no named mutant {sorted(unknown)} in catalog.toml")
    return [entry for entry in entries if entry.name in set(args.named)]


def choose(args: argparse.Namespace, config: generate.Config) -> tuple[list[Mutant], str]:
    """Return the mutants to run and a sentence saying which they are."""
    if args.named:
        return [], f"no generated mutant; named: {', '.join(args.named)}"
    every = generate.generate_all(config)
    total = f"{len(every)} generated"
    if args.id:
        chosen = [m for m in every if m.id in set(args.id)]
        return chosen, f"{len(chosen)} chosen by id of {total}"
    if args.module and args.per_module:
        return per_module(args, every, config), (
            f"the next {args.per_module} of each of {', '.join(args.module)} in the seeded order"
            f" (a uniform sample) of {total}"
        )
    if args.module:
        order = {name: position for position, name in enumerate(args.module)}
        chosen = sorted((m for m in every if m.module in order), key=lambda m: order[m.module])
        if args.limit:
            chosen = chosen[: args.limit]
        return chosen, f"the mutants of {', '.join(args.module)}: {len(chosen)} of {total}"
    if args.all:
        return every, f"every mutant: {total}"
    chosen = generate.sample(every, config)
    return chosen, f"the CI sample: {len(chosen)} of {total}"


def seeded_ids(config: generate.Config) -> dict[str, list[str]]:
    """Return module -> the ids of every mutant generated for it, in the seeded order."""
    every = generate.generate_all(config)
    modules = {m.module for m in every}
    return {
        module: [
            m.id for m in generate.seeded_order([m for m in every if m.module == module], config)
        ]
        for module in modules
    }


def per_module(
    args: argparse.Namespace, every: list[Mutant], config: generate.Config
) -> list[Mutant]:
    """Return, for each `--module`, its next `--per-module` mutants in the seeded order.

    Those already judged in a `--keep` record are passed over, so a module is sampled in
    growing prefixes of one uniform order across several runs (the report's lower bound needs
    a prefix with no gap). The modules take turns, so `--minutes` stops every one at a prefix.
    """
    judged = {
        item["id"] for path in args.keep or [] for item in json.loads(path.read_text())["rows"]
    }
    queues = [
        [m for m in generate.seeded_order([m for m in every if m.module == module], config)
         if m.id not in judged][: args.per_module]
        for module in args.module
    ]  # fmt: skip
    # Round-robin over the modules: a run stopped by --minutes leaves a prefix of each.
    return [
        queue[i]
        for i in range(max(map(len, queues), default=0))
        for queue in queues
        if i < len(queue)
    ]


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


def stale_ids(selected: dict[str, list[str]], named: list[catalog.Named]) -> list[str]:
    """Return the test ids to be run that no longer exist, printed loudly when there are any."""
    wanted = {t for tests in selected.values() for t in tests}
    wanted |= {t for entry in named for t in entry.tests}
    stale = selection.stale(sorted(wanted))
    if stale:
        print(
            f"mutants: the test map is stale: {len(stale)} selected test ids no longer exist"
            " (run `nox -s mutants -- --map-only` to map anew):\n  " + "\n  ".join(stale),
            flush=True,
        )
    return stale


def run_chosen(
    chosen: list[Mutant],
    selected: dict[str, list[str]],
    wheels: Wheels,
    config: generate.Config,
    minutes: float | None,
) -> tuple[list[report.Row], str]:
    """Run the chosen mutants in order; return their rows and why the run stopped early, if so."""
    judges: dict[str, bool] = {}
    rows: list[report.Row] = []
    started = time.monotonic()
    for number, generated in enumerate(chosen, 1):
        if minutes and time.monotonic() - started > minutes * 60:
            return rows, f"; stopped by --minutes {minutes:g} after {number - 1} mutants"
        mutant, outcome = run_generated(generated, selected[generated.id], wheels, config)
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
    return rows, ""


def keep(
    earlier: list[Path], rows: list[report.Row], described: str
) -> tuple[list[report.Row], str, list[str]]:
    """Merge this run's rows into earlier runs' (their `--out` records), in the earlier order.

    For a long run done in parts, or the survivors of a run judged again once new tests exist:
    a mutant run now replaces its earlier row, the others are reported as they were, and the
    selection sentence says what each part was and against which commit it ran. The named
    mutants' rows of the last record that ran them come along (for a run that does not).
    """
    records = [json.loads(path.read_text()) for path in earlier]
    fresh = {row.id: row for row in rows}
    latest: dict[str, dict[str, Any]] = {}
    for record in records:  # a later record's verdict of a mutant replaces an earlier one's
        latest.update({item["id"]: item for item in record["rows"]})
    kept = [
        report.Row(**{**item, "verdict": Verdict(item["verdict"])})
        for item in latest.values()
        if item["id"] not in fresh
    ]
    order = {mutant: index for index, mutant in enumerate(latest)}
    merged = sorted([*kept, *rows], key=lambda row: order.get(row.id, len(order)))
    parts = "; ".join(f"{r['selection']} (against `{r['commit']}`)" for r in records)
    sentence = f"{parts}; then {described}, whose {len(rows)} verdicts replace the earlier ones"
    named: list[str] = next((r["named"] for r in reversed(records) if r.get("named")), [])
    return merged, sentence, named


def main(argv: list[str] | None = None) -> int:
    """Map (if asked), check the map, run the chosen mutants and the named ones, report."""
    args = parse(argv)
    built_from = commit()  # the wheels are built from the tree as it is now, not as it ends
    config = generate.load_config()
    equivalents = report.load_equivalents()
    chosen, described = choose(args, config)
    print(f"mutants: {described}", flush=True)
    mapping = args.all or args.map or args.map_only
    wheels = Wheels() if mapping else None
    if wheels is not None:
        wheels.restore()
    test_map = make_map(config, args.map_file) if mapping else selection.TestMap.load(args.test_map)
    if args.map_only:
        return 0
    selected = {m.id: test_map.select(m) for m in chosen}
    partial = (args.id or args.module) and not args.report
    named_entries = [] if args.no_named or partial else pick(args)
    if stale_ids(selected, named_entries):
        return 2
    if wheels is None:
        wheels = Wheels()
        wheels.restore()
    rows, stopped = run_chosen(chosen, selected, wheels, config, args.minutes)
    named = run_named(named_entries, wheels) if named_entries else []
    wheels.restore()
    options = " ".join(a for a in (argv or sys.argv[1:]) if not a.startswith("--evidence"))
    options = options.replace(str(args.evidence), "").strip()
    described += stopped
    if args.keep:
        rows, described, earlier_named = keep(args.keep, rows, described)
        named = named or earlier_named
    context = {
        "command": f"nox -s mutants -- {options}" if options else "nox -s mutants",
        "commit": built_from,
        "selection": described,
        "control": "all (the map run)" if args.all else "each killing test, checked once",
        "goal": ",".join(config.goal_modules),
        "percent": str(config.goal_percent),
    }
    order = seeded_ids(config)
    if args.all or args.report:
        (DOCS / "MUTANTS.md").write_text(report.mutants_page(rows, equivalents, context, order))
        report.write_block(
            args.evidence, report.evidence_block(rows, equivalents, context, named, order)
        )
    args.out.write_text(
        json.dumps(
            {
                "commit": context["commit"],
                "selection": described,
                "rows": [{**r.__dict__, "verdict": r.verdict.value} for r in rows],
                "named": named,
            },
            indent=1,
        )
    )
    failing = [
        r.id for r in rows
        if r.verdict in VALID and r.verdict is not Verdict.CAUGHT and r.id not in equivalents
    ]  # fmt: skip
    named_failing = [row for row in named if "| caught |" not in row]
    for line in report.module_table(rows, equivalents, config.goal_modules, order):
        print(line)
    print(f"mutants: not caught and not explained: {len(failing)} {' '.join(failing)}")
    if args.all:
        return 0
    return 1 if failing or named_failing else 0


if __name__ == "__main__":
    sys.exit(main())
