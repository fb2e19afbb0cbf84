"""AST pass for rule zero (DESIGN §1): no wall clock in src, tests, bench, chaos, examples, tools.

ruff's TID251 (root pyproject) bans the direct spellings; this pass finds what it cannot. The data
flow of `_flow` / `_bindings` gives every expression the stdlib objects it may hold, over the whole
audited tree at once, so each of these is reported where the clock is reached (and again where it
is called):

- import aliases (`import datetime as dt; dt.datetime.now()`, `from time import time_ns as t`)
  and star imports (`from time import *; time()`, `from datetime import *; datetime.now()`);
- assignment aliases and chains (`D = datetime.datetime; D.now()`, `a = time; b = a.time; b()`),
  tuple unpacking, walrus, `for` / `with` / `match` targets, `global` / `nonlocal`, attributes
  (`self.clock = time.time`, class attributes, `setattr`), containers (`{"t": time.time}["t"]()`,
  `.append`, `.get`, iteration), `functools.partial(time.time)`, `staticmethod`, `typing.cast`,
  `operator.attrgetter` / `methodcaller`, `globals()[...]`, arguments passed to the tree's
  functions and constructors (and to callbacks such as `map(f, xs)`), what a function, method,
  property, generator or lambda returns, and names imported from another audited module;
- subclasses: a class whose base resolves to `datetime.datetime` or `datetime.date` (through an
  alias, another subclass or another module) calling `now`, `utcnow`, `today` or
  `fromtimestamp` without a timestamp through the class, `cls`, `self`, `self.__class__`,
  `type(self)` or `super()`; `type(x).now()` and `x.now()` for a datetime instance `x`;
- `getattr(time, "time")` (and `getattr` on `time` or a datetime class with a computed name),
  `vars(time)["time"]`, `time.__dict__`, `importlib.import_module("time").time`,
  `sys.modules["time"]`, a wall clock passed as a value (`default_factory=time.time`),
  `clock_gettime(CLOCK_REALTIME)` and the readers that default to "now" without a time argument.

Not followed (the optional run-time guard, `clock_guard`, sees most of these): `eval` / `exec`,
module names computed at run time, functions and classes handed through attributes, containers
or parameters (they travel only through names; methods are reached by name), values kept and
returned by third-party code, and stdlib readers outside the lists below (`uuid.uuid1()`, ...).
`time.monotonic()` and `time.perf_counter()` stay allowed: they only measure and sleep.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Final

from ._bindings import Binder, settle
from ._findings import RULE_CLOCK, Finding
from ._flow import ModuleFlow
from ._importmap import parse
from ._scopes import module_scopes
from ._values import (
    DATETIME_CLASSES,
    GETATTR,
    GETATTR_METHODS,
    NAMESPACE,
    Shared,
    string,
)

if TYPE_CHECKING:
    from pathlib import Path

    from ._layout import Workspace
    from ._scopes import Scope

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
# These read the wall clock only when no time value is passed (formatting a database time is
# fine); the number is the position of the time argument.
NOW_BY_DEFAULT: Final[dict[str, int]] = {
    "time.localtime": 0,
    "time.gmtime": 0,
    "time.ctime": 0,
    "time.asctime": 0,
    "time.strftime": 1,
    "datetime.datetime.fromtimestamp": 0,
    "datetime.datetime.utcfromtimestamp": 0,
    "datetime.date.fromtimestamp": 0,
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
# Objects whose attribute, when named by a computed string, may be a wall clock.
CLOCK_HOLDERS: Final = frozenset({"time", *DATETIME_CLASSES})
VOCABULARY: Final = frozenset(
    {*WALL_CLOCK, *NOW_BY_DEFAULT, *CLOCK_GETTIME, *MONOTONIC_CLOCK_IDS, *CLOCK_HOLDERS}
)


def _without_time_argument(node: ast.Call, position: int) -> bool:
    """Return True if the call may omit (or passes None for) its optional time argument."""
    if any(isinstance(arg, ast.Starred) for arg in node.args[: position + 1]):
        return True  # `f(*args)`: the time argument may be missing
    if node.keywords or len(node.args) > position:
        argument = node.args[position] if len(node.args) > position else None
        return isinstance(argument, ast.Constant) and argument.value is None
    return True


def _call_problems(flow: ModuleFlow, node: ast.Call, scope: Scope) -> list[tuple[int, str]]:
    """Return the problems of a call that depend on its arguments."""
    problems: list[tuple[int, str]] = []
    callees = flow.value(node.func, scope)
    for name in sorted(callees & NOW_BY_DEFAULT.keys()):
        if _without_time_argument(node, NOW_BY_DEFAULT[name]):
            detail = f"{name}() without a time argument reads the node clock"
            problems.append((node.lineno, detail))
    for name in sorted(callees & CLOCK_GETTIME):
        clock_id = flow.value(node.args[0], scope) if node.args else set()
        if not clock_id or not clock_id <= MONOTONIC_CLOCK_IDS:
            problems.append((node.lineno, f"{name}() with a non-monotonic clock id"))
    holders = _computed_attribute(flow, node, scope)
    if holders:
        detail = f"getattr({min(holders)}, <computed name>) may read the node wall clock"
        problems.append((node.lineno, detail))
    return problems


def _computed_attribute(flow: ModuleFlow, node: ast.Call, scope: Scope) -> set[str]:
    """Return the clock holders `getattr(holder, <computed>)` (in any spelling) may reach into."""
    func, args = node.func, node.args
    bound = isinstance(func, ast.Attribute) and func.attr in GETATTR_METHODS
    if isinstance(func, ast.Attribute) and bound and args and string(args[0]) is None:
        return flow.value(func.value, scope) & CLOCK_HOLDERS
    if len(args) > 1 and string(args[1]) is None and flow.callees(func, scope) & GETATTR:
        return flow.value(args[0], scope) & CLOCK_HOLDERS
    return set()


def _computed_key(flow: ModuleFlow, node: ast.Subscript, scope: Scope) -> list[tuple[int, str]]:
    """Return a problem for `vars(time)[name]` / `datetime.__dict__[name]` with a computed key."""
    if string(node.slice) is not None:
        return []
    holders = {NAMESPACE + holder for holder in CLOCK_HOLDERS} & flow.value(node.value, scope)
    if not holders:
        return []
    name = min(holders)[len(NAMESPACE) :]
    return [(node.lineno, f"vars({name})[<computed name>] may read the node wall clock")]


def clock_problems(flow: ModuleFlow) -> list[tuple[int, str]]:
    """Return (line, detail) for every wall-clock use in the module (after `settle`)."""
    problems: list[tuple[int, str]] = []
    for node, scope in flow.scopes.pairs:
        if isinstance(node, ast.Call):
            problems += _call_problems(flow, node, scope)
        elif isinstance(node, ast.Subscript):
            problems += _computed_key(flow, node, scope)
        if isinstance(node, ast.Name | ast.Attribute) and not isinstance(node.ctx, ast.Load):
            continue
        if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            clocks = sorted(flow.value(node, scope) & WALL_CLOCK)
            if clocks:
                detail = f"{clocks[0]} is the node wall clock; ask the database"
                problems.append((node.lineno, detail))
    return problems


def module_name(path: Path) -> tuple[str, bool]:
    """Return the dotted name a file is imported under (up its `__init__.py` chain), is-package."""
    is_package = path.name == "__init__.py"
    parts = [] if is_package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), is_package


def analyse(files: dict[str, tuple[Path, ast.Module]]) -> dict[str, list[tuple[int, str]]]:
    """Return the problems per key of `files` ({key: (path, tree)}), analysed together."""
    names = {key: module_name(path) for key, (path, _) in files.items()}
    shared = Shared.over(VOCABULARY, {name for name, _ in names.values() if name})
    flows = {
        key: ModuleFlow(names[key][0], module_scopes(key, tree), shared)
        for key, (_, tree) in files.items()
    }
    settle([Binder(flows[key], is_package=names[key][1]) for key in flows], shared)
    return {key: clock_problems(flow) for key, flow in flows.items()}


def check_clock(workspace: Workspace) -> list[Finding]:
    """Return rule-zero findings for every audited Python file."""
    files = {
        workspace.relative(path): (path, parse(path))
        for folder in workspace.rule_zero_folders()
        for path in workspace.python_files(folder)
    }
    return [
        Finding(relative, line, RULE_CLOCK, f"{detail} (DESIGN §1)")
        for relative, problems in analyse(files).items()
        for line, detail in problems
    ]
