"""The pause keys of a schedule (schedule files and `ql3 schedule add|pause`), read one way.

`until` is an instant (ISO 8601 with an offset) or, on the command line only, a duration (`90s`,
`15m`, `2h`, `1d`) that the DATABASE adds to its clock's now (rule zero: nothing here reads a
clock). A schedule file declares a pause with an instant only: applied again later, a duration
would pause anew each time. `pause_after_failures` is how many consecutive failed Runs pause a
schedule by the database.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ql3_cluster_postgres import PauseRequest

from ._config import ConfigurationError

__all__ = ["PAUSE_AFTER_FAILURES_MAX", "check_pause_after_failures", "entry_pause", "parse_until"]

PAUSE_AFTER_FAILURES_MAX: Final = 1000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_DURATION: Final = re.compile(r"([1-9][0-9]{0,8})(s|m|h|d)")
_UNIT_MS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# A pause longer than ten years is a typo, not a plan.
_DURATION_MAX_MS: Final = 3650 * 86_400_000
_PAUSED_KEYS: Final = ("reason", "until")


def _instant(text: str) -> int | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return (parsed - _EPOCH) // timedelta(milliseconds=1)


def parse_until(text: str, *, key: str = "--until") -> tuple[int | None, int | None]:
    """Parse an until into (instant ms, None) or (None, duration ms); nothing reads a clock.

    Raises:
        ConfigurationError: neither an ISO 8601 instant with an offset nor a duration such as
            `90s`, `15m`, `2h` or `1d` (the message names `key` and the value).

    """
    duration = _DURATION.fullmatch(text.strip())
    if duration is not None:
        ms = int(duration.group(1)) * _UNIT_MS[duration.group(2)]
        if ms > _DURATION_MAX_MS:
            raise ConfigurationError(f"{key}: {text!r} is longer than 3650 days")
        return None, ms
    instant = _instant(text)
    if instant is None:
        raise ConfigurationError(
            f"{key}: {text!r} is neither an ISO 8601 instant with an offset"
            " (e.g. 2026-03-08T09:00:00+01:00) nor a duration such as 90s, 15m, 2h or 1d"
        )
    return instant, None


def check_pause_after_failures(value: object, key: str) -> int | None:
    """Return a valid threshold (1..1000) or None; raise naming `key` otherwise."""
    if value is None:
        return None
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not (1 <= value <= PAUSE_AFTER_FAILURES_MAX)
    ):
        raise ConfigurationError(
            f"{key}={value!r} must be an integer from 1 to {PAUSE_AFTER_FAILURES_MAX}"
        )
    return value


def entry_pause(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """Read `pause_after_failures` and `paused = {reason, until}` of one schedule file entry."""
    threshold = check_pause_after_failures(
        entry.get("pause_after_failures"), f"{where}: pause_after_failures"
    )
    declared = entry.get("paused")
    if declared is None or declared is False:
        return {"pause_after_failures": threshold, "paused": None}
    if declared is True:
        declared = {}
    if not isinstance(declared, dict):
        raise ConfigurationError(f"{where}: paused must be true or a table of reason and until")
    unknown = sorted(set(declared) - set(_PAUSED_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}: paused: unknown key {unknown[0]!r} (allowed: reason, until)"
        )
    reason = declared.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(f"{where}: paused.reason={reason!r} is not a string")
    until_ms = None
    if "until" in declared:
        until = declared["until"]
        text = until.isoformat() if isinstance(until, datetime) else until
        until_ms = _instant(text) if isinstance(text, str) else None
        if until_ms is None:
            raise ConfigurationError(
                f"{where}: paused.until={until!r} must be an ISO 8601 instant with an offset"
                " (a file declares an instant: a duration would restart at every apply)"
            )
    return {
        "pause_after_failures": threshold,
        "paused": PauseRequest(reason=reason, until_ms=until_ms),
    }
