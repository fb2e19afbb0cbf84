"""The optional run-time clock guard fails tests whose own code reads the node wall clock."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

# Planted test files, kept as text: they read the wall clock on purpose, only inside the pytester
# run, and a string is not code to the audit of this repository.
_READS = """
import datetime
import time
from datetime import UTC

Moment = datetime.datetime


class Frozen(datetime.datetime):
    pass


def test_alias() -> None:
    Moment.now()


def test_subclass() -> None:
    Frozen.today()


def test_computed_name() -> None:
    exec("import time as m; m." + "time" + "_ns()")


def test_package_code() -> None:
    import ql3_planted

    ql3_planted.stamp()


def _tick() -> None:
    time.time()


def test_thread() -> None:
    import threading

    worker = threading.Thread(target=_tick)
    worker.start()
    worker.join()


def test_allowed() -> None:
    import logging

    time.monotonic()
    time.perf_counter()
    logging.getLogger("planted").warning("a log record carries its own time")
    datetime.datetime.fromtimestamp(0, UTC)
"""
_PACKAGE = """
import time


def stamp() -> int:
    return time.time_ns()
"""
_AT_IMPORT = """
import time

STARTED = time.time()


def test_ok() -> None:
    pass
"""
_GUARD = ("-p", "ql3_import_audit.clock_guard")


def _line(source: str, needle: str) -> int:
    """Return the line of `needle` in a planted file (pytester drops the leading newline)."""
    lines = source.lstrip("\n").splitlines()
    return next(number for number, text in enumerate(lines, start=1) if needle in text)


def _run(pytester: pytest.Pytester, *options: str) -> tuple[dict[str, str], str, int]:
    """Run the planted tests; return each test's outcome, the output and the exit code."""
    pytester.makepyfile(test_reads=_READS, ql3_planted=_PACKAGE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-v", *options)
    output = result.stdout.str()
    outcomes = dict(re.findall(r"test_reads\.py::(\w+) (PASSED|FAILED)", output))
    return outcomes, output, int(result.ret)


def test_guard_fails_each_read_and_passes_the_allowed_clocks(pytester: pytest.Pytester) -> None:
    """Aliased, subclass, exec-computed, package-side and threaded reads fail; monotonic passes."""
    outcomes, output, code = _run(pytester, *_GUARD)
    assert outcomes == {
        "test_alias": "FAILED",
        "test_subclass": "FAILED",
        "test_computed_name": "FAILED",
        "test_package_code": "FAILED",
        "test_thread": "FAILED",
        "test_allowed": "PASSED",
    }, output
    assert code == 1
    alias, subclass = _line(_READS, "Moment.now()"), _line(_READS, "Frozen.today()")
    package, thread = _line(_PACKAGE, "time.time_ns()"), _line(_READS, "    time.time()")
    assert f"test_reads.py:{alias}: datetime.datetime.now() reads the node wall clock" in output
    assert f"test_reads.py:{subclass}: test_reads.Frozen.today() reads" in output
    assert f"ql3_planted.py:{package}: time.time_ns() reads" in output
    assert f"test_reads.py:{thread}: time.time() reads" in output


def test_guard_fails_the_session_for_a_read_at_import(pytester: pytest.Pytester) -> None:
    """A module-level read outside any test fails the run although every test passes."""
    pytester.makepyfile(test_import=_AT_IMPORT)
    result = pytester.runpytest_subprocess("-p", "no:randomly", *_GUARD)
    output = result.stdout.str()
    assert "1 passed" in output
    assert result.ret == 1, output
    line = _line(_AT_IMPORT, "time.time()")
    assert f"test_import.py:{line}: time.time() reads the node wall clock" in output


def test_without_the_plugin_nothing_is_checked(pytester: pytest.Pytester) -> None:
    """The guard is opt-in: the same planted tests all pass when it is not enabled."""
    outcomes, output, code = _run(pytester)
    assert set(outcomes.values()) == {"PASSED"}, output
    assert (len(outcomes), code) == (6, 0)
