"""Helpers shared by the audit's tests: fixture tree paths and their `# expect:` markers."""

from __future__ import annotations

import re
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[3]
TREES = (
    "clean",
    "direction",
    "edge",
    "undeclared",
    "unused",
    "clock",
    "testkit",
    "independent",
    "rooms",
    "rooms_clean",
    "cycles",
    "cycles_clean",
)

_MARKER = re.compile(r"#\s*expect:\s*(?P<rules>[\w\-, ]+)$")


def expected(tree: Path) -> set[tuple[str, int, str]]:
    """Return (relative path, line, rule) for every `# expect: rule[, rule]` marker in a tree."""
    marks: set[tuple[str, int, str]] = set()
    for path in sorted(tree.rglob("*")):
        if path.suffix not in {".py", ".toml"} or "__pycache__" in path.parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, text in enumerate(lines, start=1):
            match = _MARKER.search(text)
            if match:
                relative = path.relative_to(tree).as_posix()
                rules = (rule.strip() for rule in match.group("rules").split(","))
                marks |= {(relative, number, rule) for rule in rules}
    return marks
