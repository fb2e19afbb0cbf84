"""Checkers that judge the product must not share the code they judge (DESIGN §14).

A checker built on the product's cron engine, decision or accounting agrees with every bug it
shares with them. So the test kit's history oracle imports no product package at all, and the
chaos verdict (harness, evidence, expected occurrences) may use the product's contracts and admin
(to set a scenario up) but none of its occurrence, decision or verify code: the product's own
verdict reaches it only as `ql3 verify --json`, a subprocess, as an operator would run it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._findings import Finding
from ._importmap import import_targets, parse

if TYPE_CHECKING:
    from ._layout import Workspace

RULE_INDEPENDENT: Final = "independent-checker"

_PRODUCT: Final = ("ql3_runtime_core", "ql3_cluster_postgres", "ql3_cluster_control")
# Names of the product's occurrence, decision and accounting code (any `_private` name too).
_JUDGING: Final = frozenset(
    {
        "checked_commit",
        "count_occurrences_ms",
        "is_interval_like",
        "latest_occurrence_ms",
        "load_timezone",
        "next_occurrence_ms",
        "occurrences_after_ms",
        "preview_occurrences",
        "resolve_cluster_schedule_decision",
        "summarize_cycle",
        "verify_history",
    }
)
# Folder or file (relative to the root) -> whether any product import at all is refused.
INDEPENDENT_CHECKERS: Final[dict[str, bool]] = {
    "tools/pg-testkit/src/ql3_testkit/_oracle.py": True,
    "tools/pg-testkit/src/ql3_testkit/_oracle_cron.py": True,
    "tools/pg-testkit/src/ql3_testkit/_oracle_rules.py": True,
    "chaos/expected.py": True,
    "chaos/harness.py": False,
    "chaos/bounds.py": False,
    "chaos/probes.py": False,
    "chaos/replicas.py": False,
    "chaos/verdict.py": False,
    "chaos/evidence.py": False,
}


def check_independence(workspace: Workspace) -> list[Finding]:
    """Return a finding per product import an independent checker makes."""
    findings: list[Finding] = []
    for relative, whole in sorted(INDEPENDENT_CHECKERS.items()):
        path = workspace.root / relative
        if not path.is_file():
            continue
        for target in import_targets(parse(path)):
            if target.top not in _PRODUCT:
                continue
            name = target.name or target.module.rsplit(".", maxsplit=1)[-1]
            submodule = "." in target.module and any(
                part.startswith("_") for part in target.module.split(".")[1:]
            )
            if whole:
                detail = f"{relative} judges the product and must not import {target.module}"
            elif target.name is None:
                detail = (
                    f"{relative} must import the product's names with `from {target.module}"
                    " import ...`, so that the audit sees which it uses"
                )
            elif name in _JUDGING or name.startswith("_") or submodule:
                detail = (
                    f"{relative} judges the product and must not import its occurrence, decision"
                    f" or verify code ({target.module}.{name}); run `ql3 verify --json` instead"
                )
            else:
                continue
            findings.append(Finding(relative, target.line, RULE_INDEPENDENT, detail))
    return findings
