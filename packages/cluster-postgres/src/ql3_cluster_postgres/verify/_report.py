"""What `verify_history` returns: one `Violation` per finding, counts per schedule, the verdict.

Kept apart from the reading (`_check`, `_reader`) and the rules (`_rules`, `_accounting`, ...),
which all add to one `Findings`. A history can break a rule millions of times (every run of a
broken build), so `Findings` keeps the details of the first `per_rule` findings of each rule and
only counts the rest: the report's memory is bounded by the number of rules, not of runs.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "RULE_NAMES",
    "Findings",
    "ScheduleLateness",
    "ScheduleVerdict",
    "VerifyReport",
    "Violation",
]

# Every kind of finding (`_verify`'s docstring says what each means); a `Violation` of any other
# rule is refused, so a report's rules are a closed set a script can switch on.
RULE_NAMES = (
    "alert",
    "attempts",
    "backfill",
    "checkpoint",
    "cursor",
    "duplicate",
    "early",
    "future",
    "invalid_schedule",
    "late",
    "manual_run",
    "misfire_policy",
    "missing",
    "not_occurrence",
    "order",
    "overlap",
    "paused",
    "revision",
    "shape",
    "skip_record",
    "stale_claim",
    "stall",
    "time_backwards",
)


class ScheduleLateness(BaseModel):
    """One schedule's admission lateness (commit time minus occurrence) over its runs in scope."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    runs: int
    p50_ms: int
    p99_ms: int
    max_ms: int

    def line(self) -> str:
        """Render the distribution as the one line `ql3 verify` prints."""
        return (
            f"lateness: schedule {self.schedule_id}: p50 {self.p50_ms} ms, p99 {self.p99_ms} ms,"
            f" max {self.max_ms} ms over {self.runs} run(s)"
        )


class Violation(BaseModel):
    """One finding of the checker: the rule broken, the schedule (if any) and what was seen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    schedule_id: int | None
    detail: str

    @field_validator("rule")
    @classmethod
    def _known_rule(cls, rule: str) -> str:
        if rule not in RULE_NAMES:
            msg = f"rule: {rule!r} is not one of {', '.join(RULE_NAMES)}"
            raise ValueError(msg)
        return rule

    def line(self) -> str:
        """Render the finding as the one line `ql3 verify` prints."""
        where = f"schedule {self.schedule_id}" if self.schedule_id is not None else "history"
        return f"{self.rule}: {where}: {self.detail}"


class ScheduleVerdict(BaseModel):
    """Counts for one schedule over the checked range (`_verify`'s docstring defines `expected`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    name: str
    state: str
    misfire_policy: str
    range_start_ms: int | None
    range_end_ms: int | None
    occurrences: int
    expected: int
    admitted: int
    skipped: int
    duplicated: int
    early: int
    missing: int


class VerifyReport(BaseModel):
    """The checker's verdict: `ok` is True exactly when there is no violation.

    `violations` details at most `violations_per_rule` findings of each rule (the first found);
    `violation_counts` counts every finding by rule, listed or not.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    violations: tuple[Violation, ...]
    violation_counts: dict[str, int]
    violations_per_rule: int
    schedules: int
    runs: int
    # Manual Runs ("trigger now") in scope: counted apart, never occurrences (migration 0008).
    manual_runs: int = 0
    # Backfilled Runs in scope (migration 0011): occurrences first recorded skipped, counted apart.
    backfilled_runs: int = 0
    # Occurrences skipped for overlap (migration 0009): each also a Run that never executed,
    # accounted for once, counted here apart.
    overlap_skipped: int = 0
    checked_at_ms: int
    since_ms: int | None
    stale_claim_grace_ms: int
    per_schedule: tuple[ScheduleVerdict, ...]
    # The time rules' allowance and instant (None: not applied) and each schedule's lateness.
    lease_ms: int | None = None
    as_of_ms: int | None = None
    lateness: tuple[ScheduleLateness, ...] = ()

    @property
    def expected(self) -> int:
        """Occurrences that had to be admitted, over every schedule."""
        return sum(item.expected for item in self.per_schedule)

    @property
    def admitted(self) -> int:
        """Distinct occurrences admitted, over every schedule."""
        return sum(item.admitted for item in self.per_schedule)

    @property
    def skipped(self) -> int:
        """Occurrences passed without a run, inside skip records, over every schedule."""
        return sum(item.skipped for item in self.per_schedule)

    @property
    def duplicated(self) -> int:
        """Extra runs beyond the first for an occurrence, over every schedule."""
        return sum(item.duplicated for item in self.per_schedule)

    @property
    def early(self) -> int:
        """Runs committed before their occurrence, over every schedule."""
        return sum(item.early for item in self.per_schedule)

    @property
    def missing(self) -> int:
        """Occurrences with neither a run nor a skip record, over every schedule."""
        return sum(item.missing for item in self.per_schedule)

    def count(self, rule: str) -> int:
        """Return how many violations of `rule` were found (listed in `violations` or not)."""
        return self.violation_counts.get(rule, 0)

    def unlisted(self, rule: str) -> int:
        """Return how many violations of `rule` were counted past the listed ones."""
        listed = sum(1 for violation in self.violations if violation.rule == rule)
        return self.count(rule) - listed

    def lines(self) -> list[str]:
        """Return one printable line per listed violation, then `unlisted_lines`."""
        return [violation.line() for violation in self.violations] + self.unlisted_lines()

    def unlisted_lines(self) -> list[str]:
        """Return one line per rule with more findings than listed: how many more."""
        return [
            f"{rule}: {self.unlisted(rule)} more not listed (the first"
            f" {self.violations_per_rule} are)"
            for rule in sorted(self.violation_counts)
            if self.unlisted(rule)
        ]


class Findings:
    """The violations found so far: the first `per_rule` of each rule in detail, all counted."""

    __slots__ = ("counts", "per_rule", "violations")

    def __init__(self, per_rule: int) -> None:
        self.per_rule = per_rule
        self.violations: list[Violation] = []
        self.counts: Counter[str] = Counter()

    def add(self, rule: str, schedule_id: int | None, detail: str | Callable[[], str]) -> None:
        """Count one finding of `rule`; keep its detail while the rule is under its cap.

        A callable detail is called only then: naming a run may cost a query.
        """
        self.counts[rule] += 1
        if self.counts[rule] <= self.per_rule:
            text = detail if isinstance(detail, str) else detail()
            self.violations.append(Violation(rule=rule, schedule_id=schedule_id, detail=text))
