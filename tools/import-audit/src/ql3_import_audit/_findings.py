"""One audit finding and its `file:line: rule: detail` rendering, shared by every check."""

from __future__ import annotations

import dataclasses
from typing import Final

RULE_DIRECTION: Final = "forbidden-direction"
RULE_EDGE: Final = "edge-import"
RULE_UNDECLARED: Final = "undeclared-dependency"
RULE_UNUSED: Final = "unused-dependency"
RULE_CLOCK: Final = "rule-zero"
RULE_ROOM: Final = "room-import"
RULE_CYCLE: Final = "import-cycle"


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """A single violation; `path` is relative to the audited root, in POSIX form."""

    path: str
    line: int
    rule: str
    detail: str

    def render(self) -> str:
        """Return the one-line form every check prints."""
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


class AuditToolError(Exception):
    """Raised when a wrapped tool (import-linter, deptry, ruff) cannot run at all."""


def deduplicate(findings: list[Finding]) -> list[Finding]:
    """Sort findings and keep the first per (file, line, rule).

    Why: the wrapped tools and the AST pass overlap on purpose (the AST also covers the aliased
    and test-side forms), and one violation should read as one line.
    """
    seen: set[tuple[str, int, str]] = set()
    unique: list[Finding] = []
    for finding in sorted(findings):
        key = (finding.path, finding.line, finding.rule)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique
