"""pytest plugin of the mutants runner: judge a mutant by assertions, or map tests to code.

Loaded with `-p ql3_mutants_plugin` (its folder on PYTHONPATH); it does nothing unless one of
two variables names an output (not `QL3_*`: the `ql3` processes some tests start refuse
unknown `QL3_*` variables, and they inherit the environment):

- `MUTANTS_QL3_VERDICT=<file.json>`: classify every failure. A kill is a test whose call failed
  an assertion: `AssertionError` (a bare `assert`, a `match=` mismatch of `pytest.raises`, a wait
  helper's deadline), `pytest.fail` (DID NOT RAISE included), or an exception of the wrong type
  escaping a `pytest.raises` block (tagged by the wrapper below), or a destructuring in the
  test's own code that found another number of items than it names (`(claim,) = repo.claim(..)`
  states that exactly one comes back; Python's unpacking `ValueError` raised in a file under the
  test's `tests` folder is that expectation failing, while one raised in product code stays an
  error). pytest-timeout's failure is a `timeout`, not a kill; so is a test still running at
  twice that bound (a hypothesis test retries a hung example past pytest-timeout's one alarm):
  a watchdog writes the findings and ends the process. With `MUTANTS_QL3_BOUNDS=<file.json>`
  (test id -> seconds) each listed test gets that bound instead of the command line's. A
  PostgreSQL syntax or undefined-object error (SQLSTATE class 42 but 42501) anywhere in the
  chain means the mutated statement cannot run at all: `sql`. Anything else (an error in setup,
  at collection, or a non-assertion exception) is an `error`. The run stops at the first kill
  or `sql` finding (`-x`, but only for findings that decide the verdict), or at `error`s in a
  third test file.
- `MUTANTS_QL3_MAP=<folder>`: measure line coverage of the three product packages with one
  coverage context per test function (parametrizations folded), record which `sql/` statements
  each test looks up (`ql3_cluster_postgres._sql._lookup`, called each time a statement is sent)
  and each test's duration and outcome. Only in-process code is seen: a statement sent by a `ql3`
  subprocess is not attributed.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest import raises as _raises
from _pytest.outcomes import Failed

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Mapping
    from types import TracebackType

    from _pytest.reports import CollectReport, TestReport

VERDICT = os.environ.get("MUTANTS_QL3_VERDICT")
# Test id (parametrizations folded) -> its own pytest-timeout bound in seconds, when judging.
BOUNDS = os.environ.get("MUTANTS_QL3_BOUNDS")
MAP = os.environ.get("MUTANTS_QL3_MAP")
PRODUCT = ("ql3_runtime_core", "ql3_cluster_postgres", "ql3_cluster_control")
_TIMEOUT_MARK = "from pytest-timeout"
_MISMATCH = "_ql3_raises_mismatch"
_UNPACK = ("not enough values to unpack", "too many values to unpack")
# Errors that are not assertions in this many test files: the mutant breaks everything it touches
# (a removed decorator, say), and running the rest of its selection would only take time.
_ERRORS_ENOUGH = 3

_findings: list[dict[str, str]] = []
_statements: dict[str, set[str]] = {}
_durations: dict[str, float] = {}
_failed: set[str] = set()
_current = {"test": ""}


def _base(nodeid: str) -> str:
    """Return the test function's id: the node id without its parametrization."""
    return nodeid.split("[", 1)[0]


def _tag_mismatches() -> None:
    """Mark an exception of the wrong type that escapes `pytest.raises` (a failed expectation)."""
    original = _raises.RaisesExc.__exit__

    def __exit__(  # noqa: N807 - replaces the method of that name
        self: _raises.RaisesExc[BaseException],
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool:
        suppressed = original(self, exc_type, exc_val, exc_tb)
        if not suppressed and isinstance(exc_val, BaseException):
            setattr(exc_val, _MISMATCH, True)
        return suppressed

    _raises.RaisesExc.__exit__ = __exit__  # type: ignore[method-assign]


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _unpacked_in_tests(exc: BaseException, tests: Path | None) -> bool:
    """Return whether `exc` is a destructuring mismatch raised in code under `tests`."""
    if tests is None or not isinstance(exc, ValueError) or not str(exc).startswith(_UNPACK):
        return False
    trace, last = exc.__traceback__, None
    while trace is not None:
        last, trace = trace, trace.tb_next
    return last is not None and Path(last.tb_frame.f_code.co_filename).is_relative_to(tests)


def _tests_folder(path: Path) -> Path | None:
    """Return the nearest `tests` folder holding a test file."""
    return next((parent for parent in path.parents if parent.name == "tests"), None)


def classify(exc: BaseException, when: str, tests: Path | None = None) -> str:
    """Return `assertion`, `timeout`, `sql` or `error` for a failure in phase `when`."""
    if isinstance(exc, Failed) and _TIMEOUT_MARK in str(exc):
        return "timeout"
    if when == "call" and (
        isinstance(exc, (AssertionError, Failed))
        or getattr(exc, _MISMATCH, False)
        or _unpacked_in_tests(exc, tests)
    ):
        return "assertion"
    for link in _chain(exc):
        state = getattr(link, "sqlstate", None)
        if isinstance(state, str) and state.startswith("42") and state != "42501":
            return "sql"
    return "error"


if VERDICT:
    _tag_mismatches()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, TestReport, TestReport]:
        """Classify each failed phase; stop the session once the verdict is decided."""
        report: TestReport = yield
        if report.failed and call.excinfo is not None:
            category = classify(call.excinfo.value, call.when, _tests_folder(Path(item.path)))
            _findings.append(
                {
                    "test": item.nodeid,
                    "when": call.when,
                    "category": category,
                    "exception": call.excinfo.typename,
                    "message": str(call.excinfo.value).strip().split("\n", 1)[0][:300],
                }
            )
            # Counted by test file: one module fixture that fails on the mutant errors every
            # test of its file, which says no more than its first error did.
            errors = len({f["test"].split("::")[0] for f in _findings if f["category"] == "error"})
            if category in ("assertion", "sql") or errors >= _ERRORS_ENOUGH:
                item.session.shouldstop = f"mutants: {category} in {item.nodeid}"
        return report

    def pytest_collectreport(report: CollectReport) -> None:
        """Record a collection error (an import of the mutated code failed, say) as an `error`."""
        if report.failed:
            _findings.append(
                {
                    "test": report.nodeid,
                    "when": "collect",
                    "category": "error",
                    "exception": "CollectError",
                    "message": str(report.longrepr).strip().splitlines()[-1][:300],
                }
            )

    def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
        """Write the findings and the count of tests run."""
        _write_verdict(session, int(exitstatus))

    def _write_verdict(session: pytest.Session, exitstatus: int) -> None:
        Path(str(VERDICT)).write_text(
            json.dumps(
                {"exitstatus": exitstatus, "ran": session.testscollected, "findings": _findings},
                indent=1,
            )
        )

    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        """Give each test listed in MUTANTS_QL3_BOUNDS its own pytest-timeout bound."""
        if not BOUNDS:
            return
        bounds: dict[str, float] = json.loads(Path(BOUNDS).read_text())
        for item in items:
            bound = bounds.get(_base(item.nodeid))
            if bound is not None:
                item.add_marker(pytest.mark.timeout(bound))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Arm a watchdog at twice pytest-timeout's bound for the whole test (all its phases)."""
        del nextitem
        with _watchdog(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
        """Arm the same watchdog over collection: a test module may call the mutant at import."""
        with _watchdog(session):
            return (yield)

    @contextlib.contextmanager
    def _watchdog(node: pytest.Item | pytest.Session) -> Iterator[None]:
        """Within the block, a timer at twice pytest-timeout's bound ends a hung process."""
        marker = node.get_closest_marker("timeout") if isinstance(node, pytest.Item) else None
        own = marker.args[0] if marker is not None and marker.args else None
        bound_s = 2 * float(str(own or node.config.getini("timeout") or 0))
        timer = threading.Timer(bound_s, _hung, (node, bound_s)) if bound_s else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            yield
        finally:
            if timer is not None:
                timer.cancel()

    def _hung(node: pytest.Item | pytest.Session, bound_s: float) -> None:
        """Record the hung test as a `timeout` and end the process: nothing else will end it."""
        _findings.append(
            {
                "test": node.nodeid,
                "when": "call" if isinstance(node, pytest.Item) else "collect",
                "category": "timeout",
                "exception": "Hung",
                "message": f"still running {bound_s:.0f} s after it started {_TIMEOUT_MARK}",
            }
        )
        _write_verdict(node.session, 1)
        os._exit(1)


if MAP:
    import coverage

    _COVERAGE = coverage.Coverage(
        data_file=str(Path(MAP) / "coverage.db"), source_pkgs=list(PRODUCT), config_file=False
    )
    _COVERAGE.set_option(
        "run:disable_warnings",
        ["module-not-imported", "no-data-collected", "module-not-measured", "already-imported"],
    )
    _COVERAGE.start()

    def _watch_statements() -> None:
        """Record the `sql/` statements each test looks up (the loader is called per send)."""
        try:
            from ql3_cluster_postgres import _sql  # noqa: PLC0415 - only where it is installed
        except ImportError:  # runtime-core alone
            return
        lookup: Callable[..., str] = _sql._lookup  # noqa: SLF001
        if getattr(lookup, "_ql3_watched", False):
            return

        def watched(statements: Mapping[str, str], folder: str, name: str) -> str:
            if folder == "sql" and _current["test"]:
                _statements.setdefault(name, set()).add(_current["test"])
            return lookup(statements, folder, name)

        watched._ql3_watched = True  # type: ignore[attr-defined]  # noqa: SLF001
        _sql._lookup = watched  # noqa: SLF001

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Run each test under its own coverage context."""
        del nextitem
        _watch_statements()
        _current["test"] = _base(item.nodeid)
        _COVERAGE.switch_context(_current["test"])
        try:
            return (yield)
        finally:
            _current["test"] = ""
            _COVERAGE.switch_context("")

    def pytest_runtest_logreport(report: TestReport) -> None:
        """Add up each test function's duration; remember the ones that failed."""
        test = _base(report.nodeid)
        _durations[test] = _durations.get(test, 0.0) + report.duration
        if report.failed:
            _failed.add(test)

    def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
        """Save the coverage data and the statement, duration and failure records."""
        del session, exitstatus
        _COVERAGE.stop()
        _COVERAGE.save()
        Path(str(MAP), "tests.json").write_text(
            json.dumps(
                {
                    "statements": {name: sorted(tests) for name, tests in _statements.items()},
                    "durations": _durations,
                    "failed": sorted(_failed),
                },
                indent=1,
            )
        )
