"""The error hierarchy of QL3; every other package subclasses `QL3Error`.

```
QL3Error
├── InvalidCronError (ValueError)          bad cron expression
├── UnknownTimezoneError (ValueError)      not an IANA zone
├── InvalidDecisionError (ValueError)      checked_commit refused a decision
├── InvalidArgumentError (ValueError)      an argument is out of range (a negative count/budget)
├── ClockRegressionError                   the database clock went back behind a claim
└── RepositoryUnavailableError             the store could not be reached (retryable)
```

Contract validation itself raises pydantic's `ValidationError` (a caller-supplied time is refused
by name, DESIGN §3), not a class from here.
"""

from __future__ import annotations

__all__ = [
    "ClockRegressionError",
    "InvalidArgumentError",
    "InvalidCronError",
    "InvalidDecisionError",
    "QL3Error",
    "RepositoryUnavailableError",
    "UnknownTimezoneError",
]


class QL3Error(Exception):
    """Base class of every error QL3 raises; catch it to catch them all."""

    __module__ = "ql3_runtime_core"


class InvalidCronError(QL3Error, ValueError):
    """Raised when a cron expression cannot be parsed; the message quotes the expression."""

    __module__ = "ql3_runtime_core"

    def __init__(self, expression: str, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(f"cron: invalid expression {expression!r}: {reason}")


class UnknownTimezoneError(QL3Error, ValueError):
    """Raised when a timezone is not a zone of the rules asked; quotes the name (and version)."""

    __module__ = "ql3_runtime_core"

    def __init__(self, timezone: str, zone_rules_version: str | None = None) -> None:
        self.timezone = timezone
        self.zone_rules_version = zone_rules_version
        within = "" if zone_rules_version is None else f" in zone rules tzdata {zone_rules_version}"
        super().__init__(f"timezone: unknown IANA timezone {timezone!r}{within}")


class InvalidDecisionError(QL3Error, ValueError):
    """Raised when `checked_commit` refuses a decision; names the offending field."""

    __module__ = "ql3_runtime_core"

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"{field}: {detail}")


class InvalidArgumentError(QL3Error, ValueError):
    """Raised when a function argument is out of range; names the argument and its value."""

    __module__ = "ql3_runtime_core"

    def __init__(self, argument: str, value: object, requirement: str) -> None:
        self.argument = argument
        self.value = value
        super().__init__(f"{argument}: {requirement}, got {value!r}")


class ClockRegressionError(QL3Error):
    """Raised when the database clock reads earlier than a claim's acquired time (fail closed)."""

    __module__ = "ql3_runtime_core"

    def __init__(self, schedule_id: int, observed_at_ms: int, claim_acquired_at_ms: int) -> None:
        self.schedule_id = schedule_id
        self.observed_at_ms = observed_at_ms
        self.claim_acquired_at_ms = claim_acquired_at_ms
        super().__init__(
            f"schedule {schedule_id}: database clock went back: observed_at_ms={observed_at_ms}"
            f" < claim_acquired_at_ms={claim_acquired_at_ms}; nothing was written",
        )


class RepositoryUnavailableError(QL3Error):
    """Raised when the store cannot be reached or a statement failed for a transient reason."""

    __module__ = "ql3_runtime_core"
