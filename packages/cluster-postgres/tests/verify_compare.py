"""One verdict from two checkers: `verify_history` and the test kit's independent oracle.

The verify tests call `checked_verify` wherever they check a history, so every fixture history
they build is also a differential test of `verify_history` against `ql3_testkit.oracle_verdict`,
which is written from DESIGN's rules with its own SQL and cronsim and imports no product code
(the import audit holds it to that). Both must walk as many occurrences (QL3's cron engine and
cronsim over the same spans) and flag the same schedules for every rule the oracle has; the
rules only `verify_history` has (revisions, cursors, attempts, ordering, zone records) are its
own tests' business and may make it stricter, never more lenient.
"""

from __future__ import annotations

from typing import Any, Final

from ql3_cluster_postgres import VIOLATIONS_PER_RULE_MAX, VerifyReport, verify_history
from ql3_testkit import OracleVerdict, oracle_verdict

__all__ = ["SHARED_RULES", "checked_verify", "compare"]

# The rules both checkers have, under the same name.
SHARED_RULES: Final = frozenset(
    {
        "duplicate",
        "early",
        "future",
        "invalid_schedule",
        "missing",
        "not_occurrence",
        "shape",
        "skip_record",
        "stale_claim",
    }
)


def compare(report: VerifyReport, oracle: OracleVerdict) -> None:
    """Require the same (rule, schedule) pairs for every shared rule and the same occurrences."""
    listed = {(v.rule, v.schedule_id) for v in report.violations if v.rule in SHARED_RULES}
    found = oracle.flagged()
    assert listed == {pair for pair in found if pair[0] in SHARED_RULES}, (
        f"verify_history only: {sorted(listed - found, key=str)};"
        f" oracle only: {sorted(found - listed, key=str)}\n"
        + "\n".join([*report.lines(), "-- oracle:", *oracle.lines()])
    )
    assert sum(report.violation_counts.values()) == len(report.violations)
    # verify_history may be stricter (its own rules), never more lenient than the oracle.
    assert oracle.ok or not report.ok, oracle.lines()
    assert (report.schedules, report.runs) == (oracle.schedules, oracle.runs)
    # The same spans walked: as many occurrences to account for, counted by two engines.
    occurrences = sum(verdict.occurrences for verdict in report.per_schedule)
    assert occurrences == oracle.occurrences, (occurrences, oracle.occurrences)


def checked_verify(dsn: str, **options: Any) -> VerifyReport:
    """Run verify_history and the oracle on `dsn`; require one verdict; return the report."""
    # Every finding listed, so that they can be compared one by one.
    report = verify_history(dsn, **{"violations_per_rule": VIOLATIONS_PER_RULE_MAX, **options})
    oracle = oracle_verdict(
        dsn,
        since_ms=options.get("since_ms"),
        stale_claim_grace_ms=options.get("stale_claim_grace_ms", 5_000),
    )
    compare(report, oracle)
    return report
