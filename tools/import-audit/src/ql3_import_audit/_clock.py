"""AST pass for rule zero: no node wall clock in src, tests, bench, chaos or tools (SPEC §1).

ruff's TID251 (root pyproject) bans the direct spellings; this pass resolves what it cannot:
aliases (`import datetime as dt; dt.datetime.now()`, `from time import time_ns as t`),
`getattr(time, "time")`, `importlib.import_module("time").time`, `sys.modules["time"]`,
a wall clock passed as a value (`default_factory=time.time`), `clock_gettime(CLOCK_REALTIME)` and
the clock readers that default to "now" when called without a time argument.
`time.monotonic()` and `time.perf_counter()` stay allowed: they only measure and sleep.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Final

from ._findings import RULE_CLOCK, Finding
from ._importmap import bound_names, parse

if TYPE_CHECKING:
    from ._layout import Workspace

# Referencing any of these (called or not) reads or hands out the node wall clock.
WALL_CLOCK: Final = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.CLOCK_REALTIME",
        "time.CLOCK_TAI",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
    }
)
# These read the wall clock only when no time value is passed (formatting a database time is fine).
NOW_BY_DEFAULT: Final[dict[str, int]] = {
    "time.localtime": 0,
    "time.gmtime": 0,
    "time.ctime": 0,
    "time.asctime": 0,
    "time.strftime": 1,
}
CLOCK_GETTIME: Final = frozenset({"time.clock_gettime", "time.clock_gettime_ns"})
MONOTONIC_CLOCK_IDS: Final = frozenset(
    {
        "time.CLOCK_MONOTONIC",
        "time.CLOCK_MONOTONIC_RAW",
        "time.CLOCK_BOOTTIME",
        "time.CLOCK_PROCESS_CPUTIME_ID",
        "time.CLOCK_THREAD_CPUTIME_ID",
    }
)
_MODULE_LOADERS: Final = frozenset({"importlib.import_module", "__import__"})


class _Resolver:
    """Resolve an expression to the dotted name it denotes, following import aliases."""

    def __init__(self, tree: ast.Module) -> None:
        self._bound = bound_names(tree)

    def __call__(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self._bound.get(
                node.id, node.id if node.id in {"getattr", "__import__"} else None
            )
        if isinstance(node, ast.Attribute):
            base = self(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Subscript) and self(node.value) == "sys.modules":
            return _string(node.slice)
        return None

    def _call(self, node: ast.Call) -> str | None:
        func = self(node.func)
        if func == "getattr" and len(node.args) >= 2:  # noqa: PLR2004 (object, name)
            base, name = self(node.args[0]), _string(node.args[1])
            return f"{base}.{name}" if base and name else None
        if func in _MODULE_LOADERS and node.args:
            return _string(node.args[0])
        return None


def _string(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _without_time_argument(node: ast.Call, position: int) -> bool:
    """Return True if the call omits (or passes None for) its optional time argument."""
    if node.keywords or len(node.args) > position:
        argument = node.args[position] if len(node.args) > position else None
        return isinstance(argument, ast.Constant) and argument.value is None
    return True


def clock_problems(tree: ast.Module) -> list[tuple[int, str]]:
    """Return (line, detail) for every wall-clock use in the module."""
    resolve = _Resolver(tree)
    problems: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = resolve(node.func)
            if name in NOW_BY_DEFAULT and _without_time_argument(node, NOW_BY_DEFAULT[name]):
                problems.append(
                    (node.lineno, f"{name}() without a time argument reads the node clock")
                )
            elif name in CLOCK_GETTIME and not (
                node.args and resolve(node.args[0]) in MONOTONIC_CLOCK_IDS
            ):
                problems.append((node.lineno, f"{name}() with a non-monotonic clock id"))
        if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            if isinstance(node, ast.Name | ast.Attribute) and not isinstance(node.ctx, ast.Load):
                continue
            name = resolve(node)
            if name in WALL_CLOCK:
                problems.append((node.lineno, f"{name} is the node wall clock; ask the database"))
    return problems


def check_clock(workspace: Workspace) -> list[Finding]:
    """Return rule-zero findings for every audited Python file."""
    findings: list[Finding] = []
    for folder in workspace.rule_zero_folders():
        for path in workspace.python_files(folder):
            tree = parse(path)
            relative = workspace.relative(path)
            findings += [
                Finding(relative, line, RULE_CLOCK, f"{detail} (SPEC §1)")
                for line, detail in clock_problems(tree)
            ]
    return findings
