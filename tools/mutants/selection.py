"""Which tests judge a mutant: a map from product code to the tests that run it.

The map is made once per run of the whole set (`run.py --map`, part of `--all`): each test
folder of `mutants.toml` runs whole on the unmutated wheels under the plugin's map mode, which
records line coverage with one context per test function and the `sql/` statements each test
looks up. It is stored as `test_map.json` beside this file (committed, so CI's sample needs no
map run) with each file's sha256:

- Python: while a file is unchanged since the map, a mutant is judged by the tests that ran
  its statement (the first line of the innermost statement holding the edit). Once the file has
  changed, by the tests that ran any line of its enclosing function. Code that runs at import
  (module constants, class bodies such as the contracts' field bounds) has no test context; it
  is judged by the tests of the functions that name what it binds (or its class), in any
  product module, else by every test of its file; the fastest of them, as many as fit in 60 s
  of their mapped durations (hundreds of unit tests, a few dozen integration tests).
- SQL: the tests that sent the statement.

Only tests that passed in the map run are in the map (a test that fails unmutated cannot judge).
Selections run fastest first, so a kill usually comes from a short test.

A map outlives the tests it names: a renamed or deleted test leaves a stale id, and pytest given
one id it cannot find runs nothing at all, so a selection holding one would judge nothing. The
runner checks every selected id against the test files (`stale`) before any mutant runs and
stops, naming them; the cure is the one command that maps anew (`run.py --map-only`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sql_mutants
from model import ROOT, Mutant

MAP_FILE = Path(__file__).with_name("test_map.json")
# How many seconds (mapped durations) of the fastest tests judge code that runs at import (a
# class body, a constant): a count would cut unit tests short and let integration tests run long.
IMPORT_TIME_BUDGET_S = 60.0


def sha(path: Path) -> str:
    """Return the sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_file(measured: str) -> str | None:
    """Map an installed module path (site-packages/ql3_x/...) to its source path in the tree."""
    parts = Path(measured).parts
    for index, part in enumerate(parts):
        if part.startswith("ql3_") and index and parts[index - 1] == "site-packages":
            package = part.removeprefix("ql3_").replace("_", "-")
            return "/".join(("packages", package, "src", *parts[index:]))
    return None


def _contexts_by_line(db: Path) -> dict[str, dict[int, set[str]]]:
    """Read coverage's SQLite data: source file -> line -> test contexts (the empty one dropped)."""
    found: dict[str, dict[int, set[str]]] = {}
    with sqlite3.connect(db) as conn:
        contexts = dict(conn.execute("SELECT id, context FROM context").fetchall())
        files = dict(conn.execute("SELECT id, path FROM file").fetchall())
        for file_id, context_id, numbits in conn.execute(
            "SELECT file_id, context_id, numbits FROM line_bits"
        ):
            test, source = contexts[context_id], _source_file(files[file_id])
            if not test or source is None:
                continue
            lines = found.setdefault(source, {})
            for line in _numbits_to_lines(numbits):
                lines.setdefault(line, set()).add(test)
    return found


def _numbits_to_lines(numbits: bytes) -> list[int]:
    """Decode coverage's numbits (bit n of byte b set: line b * 8 + n)."""
    return [
        index * 8 + bit for index, byte in enumerate(numbits) for bit in range(8) if byte >> bit & 1
    ]


def build(
    outputs: list[Path], commit: str, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Combine the map runs' outputs (one folder per test suite) into the stored map.

    With `earlier` (a stored map), the outputs map only some test files: the earlier map's
    entries for every other test are kept, those of the mapped files replaced.
    """
    durations: dict[str, float] = {}
    failed: set[str] = set()
    statements: dict[str, set[str]] = {}
    lines: dict[str, dict[int, set[str]]] = {}
    if earlier is not None:
        mapped = {
            test.split("::", 1)[0]
            for output in outputs
            for test in json.loads((output / "tests.json").read_text())["durations"]
        }
        _decode(earlier, mapped, durations, statements, lines)
    for output in outputs:
        record = json.loads((output / "tests.json").read_text())
        durations.update(record["durations"])
        failed.update(record["failed"])
        for name, tests in record["statements"].items():
            statements.setdefault(name, set()).update(tests)
        for source, by_line in _contexts_by_line(output / "coverage.db").items():
            for line, tests in by_line.items():
                lines.setdefault(source, {}).setdefault(line, set()).update(tests)
    tests = sorted(test for test in durations if test not in failed)
    index = {test: position for position, test in enumerate(tests)}

    def encode(group: set[str]) -> list[int]:
        return sorted(index[test] for test in group if test in index)

    files: dict[str, Any] = {}
    for source, by_line in sorted(lines.items()):
        sets: dict[tuple[int, ...], int] = {}
        line_sets: dict[str, int] = {}
        for line, group in sorted(by_line.items()):
            key = tuple(encode(group))
            line_sets[str(line)] = sets.setdefault(key, len(sets))
        path = ROOT / source
        files[source] = {
            "sha256": sha(path) if path.exists() else "",
            "sets": [list(key) for key in sets],
            "lines": line_sets,
        }
    return {
        "commit": commit,
        "tests": tests,
        "durations": [round(durations[test], 3) for test in tests],
        "failed_unmutated": sorted(failed),
        "files": files,
        "statements": {name: encode(group) for name, group in sorted(statements.items())},
    }


def _decode(
    data: dict[str, Any],
    mapped: set[str],
    durations: dict[str, float],
    statements: dict[str, set[str]],
    lines: dict[str, dict[int, set[str]]],
) -> None:
    """Add a stored map's records of the tests outside the files in `mapped` to the others."""
    tests: list[str] = data["tests"]
    keep = {i for i, test in enumerate(tests) if test.split("::", 1)[0] not in mapped}
    durations.update({tests[i]: float(data["durations"][i]) for i in keep})
    for name, group in data["statements"].items():
        statements.setdefault(name, set()).update(tests[i] for i in group if i in keep)
    for source, entry in data["files"].items():
        by_line = lines.setdefault(source, {})
        for line, position in entry["lines"].items():
            group = {tests[i] for i in entry["sets"][position] if i in keep}
            by_line.setdefault(int(line), set()).update(group)


@dataclass
class TestMap:
    """The stored map, with lookups for mutants."""

    data: dict[str, Any]
    _sources: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path = MAP_FILE) -> TestMap:
        """Read the stored map."""
        return cls(json.loads(path.read_text()))

    @property
    def tests(self) -> list[str]:
        """Return every test id of the map."""
        return list(self.data["tests"])

    def duration(self, test: str) -> float:
        """Return the test's duration in the map run (0 for tests unknown to the map)."""
        position = {t: i for i, t in enumerate(self.data["tests"])}.get(test)
        return float(self.data["durations"][position]) if position is not None else 0.0

    def select(self, mutant: Mutant) -> list[str]:
        """Return the test ids that judge `mutant`, fastest first (empty: untested)."""
        if mutant.kind == "sql":
            found = set(self.data["statements"].get(mutant.target, []))
            if "/migrations/" in mutant.file:
                found |= self._calling(mutant)
        else:
            found = self._python(mutant)
        order = sorted(found, key=lambda i: (self.data["durations"][i], self.data["tests"][i]))
        return [self.data["tests"][i] for i in order]

    def _calling(self, mutant: Mutant) -> set[int]:
        """Return the tests whose own code names the migration function holding the mutant.

        The role tests call the worker functions directly (as a worker login would, with
        arguments the Python API never sends); they send no `sql/` statement the map could see.
        """
        text = (ROOT / mutant.file).read_text()
        names = [
            body.function.rsplit(".", 1)[-1]
            for body in sql_mutants.definer_bodies(text)
            if body.start <= mutant.span[0] <= body.start + len(body.text)
        ]
        if not names:
            return set()
        found: set[int] = set()
        for index, test in enumerate(self.data["tests"]):
            source = self._test_source(test)
            if any(name in source for name in names):
                found.add(index)
        return found

    def _test_source(self, test: str) -> str:
        """Return the source of one test function and of its module's top-level constants.

        A parametrized test's cases (a probe matrix, say) live in module constants.
        """
        path, *names = test.split("::")
        if path not in self._sources:
            file = ROOT / path
            self._sources[path] = (
                ast.parse(file.read_text())
                if file.is_file()
                else ast.Module(body=[], type_ignores=[])
            )
        body: list[ast.stmt] = self._sources[path].body
        node: ast.AST | None = None
        for name in names:
            node = next(
                (
                    n
                    for n in body
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                    and n.name == name
                ),
                None,
            )
            if node is None:
                return ""
            body = node.body
        if node is None:
            return ""
        constants = [
            statement
            for statement in self._sources[path].body
            if isinstance(statement, ast.Assign | ast.AnnAssign)
        ]
        return "\n".join(ast.unparse(n) for n in (node, *constants))

    def _lines(self, file: str) -> dict[int, set[int]]:
        entry = self.data["files"].get(file)
        if entry is None:
            return {}
        return {int(line): set(entry["sets"][s]) for line, s in entry["lines"].items()}

    def _tree(self, file: str) -> ast.Module:
        if file not in self._sources:
            self._sources[file] = ast.parse((ROOT / file).read_text())
        return self._sources[file]

    def _python(self, mutant: Mutant) -> set[int]:
        lines = self._lines(mutant.file)
        tree = self._tree(mutant.file)
        function = _innermost_function(tree, mutant.line)
        if function is None:
            return self._import_time(mutant, tree)
        fresh = self.data["files"].get(mutant.file, {}).get("sha256") == sha(ROOT / mutant.file)
        if fresh and mutant.line >= function.body[0].lineno:
            first, last = _statement_span(function, mutant.line)
            return {t for line, tests in lines.items() if first <= line <= last for t in tests}
        # A changed file, or the function's header (decorators, defaults): its body's tests.
        return _tests_in(lines, function)

    def _import_time(self, mutant: Mutant, tree: ast.Module) -> set[int]:
        """Select for code that runs at import: the tests of the functions naming what it binds."""
        names = _bound_names(tree, mutant.line)
        found: set[int] = set()
        owner = _innermost_class(tree, mutant.line)
        if owner is not None:
            for method in _functions(owner):
                found |= _tests_in(self._lines(mutant.file), method)
        for file in self.data["files"]:
            if not (ROOT / file).exists():
                continue
            lines = self._lines(file)
            for function in _functions(self._tree(file)):
                if names & {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}:
                    found |= _tests_in(lines, function)
        if not found:
            found = {t for tests in self._lines(mutant.file).values() for t in tests}
        # Import-time code fans out to every user of a class; its fastest tests judge it.
        fastest = sorted(found, key=lambda i: self.data["durations"][i])
        chosen: set[int] = set()
        spent = 0.0
        for test in fastest:
            spent += self.data["durations"][test]
            if chosen and spent > IMPORT_TIME_BUDGET_S:
                break
            chosen.add(test)
        return chosen


def stale(tests: list[str]) -> list[str]:
    """Return the test ids whose file, class or function no longer exists in the tree.

    Read from the test files' syntax (no collection run): an id `path::[Class::]function`
    names a file under the repository and a chain of definitions in it.
    """
    trees: dict[str, ast.Module | None] = {}
    missing: list[str] = []
    for test in tests:
        path, *names = test.split("[", 1)[0].split("::")
        if path not in trees:
            source = ROOT / path
            trees[path] = ast.parse(source.read_text()) if source.is_file() else None
        tree = trees[path]
        body: list[ast.stmt] = tree.body if tree is not None else []
        for name in names if tree is not None else ["<file>"]:
            found = [
                node
                for node in body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == name
            ]
            if not found:
                missing.append(test)
                break
            body = found[0].body
    return missing


def _tests_in(lines: dict[int, set[int]], function: ast.AST) -> set[int]:
    """Return the tests that ran any line of `function`."""
    first, last = getattr(function, "lineno", 0), getattr(function, "end_lineno", 0)
    return {t for line, tests in lines.items() if first <= line <= last for t in tests}


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _innermost_function(tree: ast.AST, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """Return the innermost function whose definition (decorators included) holds `line`."""
    inside = [
        f
        for f in _functions(tree)
        if min([f.lineno, *(d.lineno for d in f.decorator_list)]) <= line <= (f.end_lineno or 0)
    ]
    return max(inside, key=lambda f: f.lineno) if inside else None


def _innermost_class(tree: ast.AST, line: int) -> ast.ClassDef | None:
    inside = [
        c
        for c in ast.walk(tree)
        if isinstance(c, ast.ClassDef) and c.lineno <= line <= (c.end_lineno or 0)
    ]
    return max(inside, key=lambda c: c.lineno) if inside else None


def _statement_span(function: ast.AST, line: int) -> tuple[int, int]:
    """Return the lines of the innermost statement holding `line` (a compound one's header).

    Coverage records the lines a statement's parts ran on (a condition over three lines may
    record any of them), so a statement is judged by every line of its span.
    """
    spans = [(line, line)]
    for node in ast.walk(function):
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.ClassDef):
            body = getattr(node, "body", None)
            last = body[0].lineno - 1 if isinstance(body, list) and body else node.end_lineno
            last = max(last or node.lineno, node.lineno)
            if node.lineno <= line <= last:
                spans.append((node.lineno, last))
    return max(spans[1:] or spans)


def _bound_names(tree: ast.Module, line: int) -> set[str]:
    """Return the names bound by the module- or class-level statement holding `line`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef | ast.Module):
            continue
        for statement in node.body:
            if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
                if isinstance(statement, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(statement.name)
                    continue  # its body is visited as a node of its own
                names |= {
                    target.id
                    for target in ast.walk(statement)
                    if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store)
                }
                if isinstance(node, ast.ClassDef):
                    names.add(node.name)
    return names
