"""Chaos suite configuration: the `scenario` fixture and the docs/EVIDENCE.md writer.

Every scenario records one evidence row (faults injected; expected / admitted / duplicated / early
/ missing occurrences; 40001 retries; duration; outcome). At the end of the session the rows are
written to docs/EVIDENCE.md beside the evidence list the design asks for (DESIGN §14), so the
document always shows the latest run.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import pytest
from evidence import ORDER, write_evidence
from harness import EVIDENCE, Scenario

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator

KEEP_LOGS = os.environ.get("CHAOS_KEEP_LOGS") == "1"


@pytest.fixture
def scenario(request: pytest.FixtureRequest) -> Iterator[Callable[[str, str], Scenario]]:
    """Return a factory of scenarios; everything they started is torn down after the test."""
    made: list[Scenario] = []

    def make(name: str, items: str) -> Scenario:
        created = Scenario(name, items)
        created.evidence.outcome = "running"
        made.append(created)
        return created

    yield make
    report = getattr(request.node, "rep_call", None)
    for created in made:
        created.close()
        if report is None:
            created.evidence.outcome = "error"
        else:
            created.evidence.outcome = "passed" if report.passed else "FAILED"
        if created.evidence.outcome == "passed" and created.evidence.verdict:
            created.evidence.outcome = f"passed: {created.evidence.verdict}"
        if created.evidence.outcome.startswith("passed") and not KEEP_LOGS:
            # Replica logs are kept only for scenarios that did not pass (or CHAOS_KEEP_LOGS=1).
            shutil.rmtree(created.workdir, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item,
    call: pytest.CallInfo[None],  # noqa: ARG001 - part of the hook's signature
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call-phase report on the item so the fixture can record the outcome."""
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]  # read back by the fixture
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show every scenario's measurements in the console (a partial run writes no document)."""
    for row in EVIDENCE:
        terminalreporter.write_line(
            f"{row.scenario}: {row.outcome}; max lateness {row.max_lateness_ms} ms, bound"
            f" {row.bound}; " + "; ".join(row.notes)
        )


def pytest_sessionfinish(session: pytest.Session) -> None:  # noqa: ARG001 - hook signature
    """Write docs/EVIDENCE.md when every scenario ran (a partial run must not shrink it)."""
    if {row.scenario for row in EVIDENCE} >= set(ORDER):
        write_evidence(EVIDENCE)
