"""No import circles: every cycle among the modules of one audited package is a finding.

A circle makes import order matter (the module imported second sees the first half-initialised)
and hides which module is the lower one. The graph comes from grimp in a child process
(`_graph_worker`), without the imports inside `if TYPE_CHECKING:` blocks (they never run). For
each module that lies on a cycle, the shortest cycle through it is found; each distinct cycle is
one finding, on the import line of its first module (the cycle written from its smallest module
name), so every module on a circle is named by at least one finding.
"""

from __future__ import annotations

import json
import tempfile
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ._child import importable, run_child
from ._findings import RULE_CYCLE, Finding

if TYPE_CHECKING:
    from ._layout import Package, Workspace


class _Edge(TypedDict):
    """One direct import inside a package, as `_graph_worker` prints it."""

    importer: str
    imported: str
    line_numbers: list[int]


Graph = dict[str, set[str]]


def shortest_cycle(graph: Graph, start: str) -> list[str]:
    """Return the shortest cycle from `start` back to it (start not repeated), [] if none.

    Breadth first over the imports, so the cycle found is one of the shortest through `start`;
    every module it passes lies on a cycle with `start` (the same strongly connected component).
    """
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return list(reversed(path))
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    return []


def cycles(graph: Graph) -> list[list[str]]:
    """Return the distinct shortest cycles through every module that lies on a cycle.

    Each cycle is written from its smallest module name, so the same circle found from two of its
    modules is reported once.
    """
    distinct: dict[tuple[str, ...], list[str]] = {}
    for module in sorted(graph):
        cycle = shortest_cycle(graph, module)
        if cycle:
            first = cycle.index(min(cycle))
            rotated = cycle[first:] + cycle[:first]
            distinct.setdefault(tuple(rotated), rotated)
    return [distinct[key] for key in sorted(distinct)]


def _module_file(package: Package, module: str) -> Path:
    base = package.src.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def check_cycles(workspace: Workspace) -> list[Finding]:
    """Return one finding per distinct import cycle inside any audited package's `src`."""
    packages = importable(workspace.packages)
    if not packages:
        return []
    names = [package.import_name for package in packages]
    with tempfile.TemporaryDirectory(prefix="ql3-import-audit-") as tmp:
        output = run_child(
            "ql3_import_audit._graph_worker", packages, Path(tmp), *names, tool="grimp"
        )
    graph: Graph = {}
    lines: dict[tuple[str, str], list[int]] = {}
    for edge in json.loads(output):
        typed: _Edge = edge
        graph.setdefault(typed["importer"], set()).add(typed["imported"])
        lines[typed["importer"], typed["imported"]] = typed["line_numbers"]
    findings: list[Finding] = []
    for cycle in cycles(graph):
        owner = next(p for p in packages if p.import_name == cycle[0].split(".", maxsplit=1)[0])
        hops = list(zip(cycle, [*cycle[1:], cycle[0]], strict=True))
        where = ", ".join(f"{a} line {lines[a, b][0]}" for a, b in hops)
        detail = (
            f"import cycle {' -> '.join([*cycle, cycle[0]])} (imports at {where});"
            " imports under `if TYPE_CHECKING:` do not count"
        )
        path = workspace.relative(_module_file(owner, cycle[0]))
        findings.append(Finding(path, lines[hops[0]][0], RULE_CYCLE, detail))
    return findings
