"""One verdict from two checkers: the streaming `verify_history` and the in-memory reference.

The verify tests call `checked_verify` wherever they check a history, so every fixture history
they build is also a differential test of the streaming rewrite (issue 12.6) against the checker
it replaced (`verify_reference`): the same verdict, the same findings per rule and schedule, the
same counts per schedule.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ql3_cluster_postgres import VIOLATIONS_PER_RULE_MAX, VerifyReport, verify_history
from verify_reference import reference_verdict

__all__ = ["checked_verify"]


def checked_verify(dsn: str, **options: Any) -> VerifyReport:
    """Run verify_history and the reference on `dsn`; require one verdict; return the report."""
    # Every finding listed, so that they can be compared one by one.
    report = verify_history(dsn, **{"violations_per_rule": VIOLATIONS_PER_RULE_MAX, **options})
    reference = reference_verdict(
        dsn,
        since_ms=options.get("since_ms"),
        stale_claim_grace_ms=options.get("stale_claim_grace_ms", 5_000),
    )
    # The reference predates workers: the `attempts` rule (what workers did after admission,
    # `_verify_attempts`) has its own tests, and is left out of the comparison.
    listed = Counter((v.rule, v.schedule_id) for v in report.violations if v.rule != "attempts")
    found = Counter((v.rule, v.schedule_id) for v in reference.violations)
    assert listed == found, (listed - found, found - listed)
    assert sum(report.violation_counts.values()) == len(report.violations)
    assert report.ok is (not reference.violations and not report.count("attempts"))
    assert list(report.per_schedule) == reference.verdicts
    assert (report.schedules, report.runs) == (reference.schedules, reference.runs)
    return report
