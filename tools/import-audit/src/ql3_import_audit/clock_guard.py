"""Optional pytest plugin: fail the test during which our code reads the node wall clock.

The AST pass (`_clock`) reports what it can see in the source; this guard watches what actually
runs, so it also catches what no static pass follows: names computed at run time, `eval` / `exec`,
a clock reached through an object built in another package. Enable it for one pytest run with
`-p ql3_import_audit.clock_guard` (for the package sessions: install the ql3-import-audit wheel
next to the package wheels and add that option in the noxfile's `_pytest`). It is deliberately
not a `pytest11` entry point: installing the audit enables nothing.

How: a `sys.setprofile` hook (and `threading.setprofile`, for threads started later) sees every
call of a C function. A call of `time.time` / `time.time_ns`, or of `now` / `utcnow` / `today`
on `datetime.date` or any subclass of it, made from our code is recorded, and the test during
which it happened fails naming `file:line`; a read outside any test (at import or collection)
fails the session. Our code is a `ql3_*` module (the installed wheels; this audit excepted) or a
file under the pytest root outside any virtualenv or site-packages (the tests, chaos, bench).
A call made by the standard library or a third-party library (the time of a logging record,
pytest's own durations) is not ours.

Not seen: the readers that take an optional time argument (`time.localtime()`, the hook is not
given arguments), clocks called from C (`functools.partial(time.time)()`, `map(time.time, ...)`),
and processes the tests start. The AST pass covers the first two.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator
    from types import FrameType

    from _pytest.reports import TestReport

_TIME_READERS: Final = frozenset({"time", "time_ns"})
_DATETIME_READERS: Final = frozenset({"now", "utcnow", "today"})
_READERS: Final = _TIME_READERS | _DATETIME_READERS
_NOT_OURS: Final = frozenset({"site-packages", "dist-packages", ".venv", ".nox", ".tox"})


def clock_name(func: object) -> str | None:
    """Return `module.name` of a wall-clock reader, None for any other callable."""
    name = getattr(func, "__name__", None)
    if name not in _READERS:
        return None
    owner = getattr(func, "__self__", None)
    if owner is time and name in _TIME_READERS:
        return f"time.{name}"
    if isinstance(owner, type) and issubclass(owner, dt.date):
        return (
            f"{owner.__module__}.{owner.__qualname__}.{name}" if name in _DATETIME_READERS else None
        )
    return None


@dataclasses.dataclass
class ClockGuard:
    """The profile hook and the reads it recorded, not yet reported."""

    root: Path
    reads: list[str] = dataclasses.field(default_factory=list)
    _verdicts: dict[str, bool] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        """Record a wall-clock read by our code (the `sys.setprofile` hook)."""
        if event != "c_call":
            return
        name = clock_name(arg)
        if name is None:
            return
        caller = _source_frame(frame)
        if caller is not None and self._ours(caller):
            where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
            with self._lock:
                self.reads.append(f"{where}: {name}() reads the node wall clock (rule zero)")

    def take(self) -> list[str]:
        """Return the reads recorded since the last call and forget them."""
        with self._lock:
            reads, self.reads = self.reads, []
        return reads

    def _ours(self, frame: FrameType) -> bool:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("ql3_import_audit"):
            return False
        if module.startswith("ql3_"):
            return True
        filename = frame.f_code.co_filename
        verdict = self._verdicts.get(filename)
        if verdict is None:
            path = Path(filename).resolve()
            verdict = path.is_relative_to(self.root) and not _NOT_OURS & set(path.parts)
            self._verdicts[filename] = verdict
        return verdict


def _source_frame(frame: FrameType | None) -> FrameType | None:
    """Return the frame whose source made the call: `exec` / `eval` code counts as its caller's."""
    while frame is not None and frame.f_code.co_filename.startswith("<"):
        frame = frame.f_back
    return frame


_GUARD = pytest.StashKey[ClockGuard]()
_OUTSIDE_TESTS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Install the profile hook for this thread and every thread started from now on."""
    guard = ClockGuard(config.rootpath.resolve())
    config.stash[_GUARD] = guard
    config.stash[_OUTSIDE_TESTS] = []
    sys.setprofile(guard.profile)
    threading.setprofile(guard.profile)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the hook again."""
    if _GUARD in config.stash:
        sys.setprofile(None)
        threading.setprofile(None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Set aside the reads made before this test started (import, collection, teardowns)."""
    config = item.config
    config.stash[_OUTSIDE_TESTS] += config.stash[_GUARD].take()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, object, None]:
    """Fail the phase (setup, call or teardown) of a test during which the clock was read."""
    outcome = yield
    reads = item.config.stash[_GUARD].take()
    if not reads:
        return
    report: TestReport = outcome.get_result()  # type: ignore[attr-defined]
    before = f"{report.longrepr}\n\n" if report.failed and report.longrepr else ""
    report.outcome = "failed"
    report.longrepr = before + "\n".join(reads)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the session for reads made outside every test."""
    config = session.config
    config.stash[_OUTSIDE_TESTS] += config.stash[_GUARD].take()
    if config.stash[_OUTSIDE_TESTS] and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """List the reads made outside every test."""
    reads = config.stash.get(_OUTSIDE_TESTS, [])
    if reads:
        terminalreporter.section("rule zero: wall clock read outside any test")
        for read in reads:
            terminalreporter.line(read)
