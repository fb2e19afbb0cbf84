"""What `verify_history` returns: one `Violation` per finding, counts per schedule, the verdict.

Kept apart from the reading (`_verify`) and the rules (`_verify_rules`), which both build them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ScheduleVerdict", "VerifyReport", "Violation"]


class Violation(BaseModel):
    """One finding of the checker: the rule broken, the schedule (if any) and what was seen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    schedule_id: int | None
    detail: str

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
    """The checker's verdict: `ok` is True exactly when there is no violation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    violations: tuple[Violation, ...]
    schedules: int
    runs: int
    checked_at_ms: int
    since_ms: int | None
    stale_claim_grace_ms: int
    per_schedule: tuple[ScheduleVerdict, ...]

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
        """Return how many violations of `rule` were found."""
        return sum(1 for violation in self.violations if violation.rule == rule)

    def lines(self) -> list[str]:
        """Return one printable line per violation."""
        return [violation.line() for violation in self.violations]
