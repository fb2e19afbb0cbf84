"""Expected occurrences from an engine independent of QL3: cronsim walking zoneinfo instants.

A verdict whose expectations come from the product's own `next_occurrence_ms` cannot see a cron
bug: the product and the check would agree on the same wrong instant. So the chaos harness never
imports ql3_runtime_core's cron functions; it asks cronsim (a separate implementation, test-only)
which instants an expression names.

cronsim reads 5 fields, or 6 with seconds first (`* * * * * *`, `*/10 * * * * *`), the dialect
the scenarios use. Its iterator yields the first match strictly after the start instant (it drops
the start's fraction of a second, then ticks one second), which is QL3's "first occurrence
strictly after" (DESIGN §4). The one place where cron engines legitimately differ is local wall
time that a daylight-saving change skips or repeats; rather than guess QL3's rule there, the
walker refuses a span in which the zone's UTC offset changes (every scenario schedules in UTC, so
this never fires in the suite; it stops a future scenario from trusting an unchecked answer).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

__all__ = ["ExpectationError", "first_after", "occurrences_between"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ExpectationError(AssertionError):
    """The independent engine cannot state the expectation exactly (a harness limit, not a pass)."""


def _zone(name: str) -> tzinfo:
    return UTC if name in {"UTC", "Etc/UTC"} else ZoneInfo(name)


def _local(ms: int, zone: tzinfo) -> datetime:
    # Epoch arithmetic, not a clock read: every instant comes from the database (rule zero).
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(zone)


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _walker(cron: str, timezone: str, after_ms: int) -> tuple[CronSim, tzinfo]:
    zone = _zone(timezone)
    try:
        return CronSim(cron, _local(after_ms, zone)), zone
    except CronSimError as exc:
        msg = f"cronsim cannot read cron {cron!r}: {exc}"
        raise ExpectationError(msg) from exc


def occurrences_between(cron: str, timezone: str, after_ms: int, through_ms: int) -> list[int]:
    """Every occurrence t of `cron` in `timezone` with after_ms < t <= through_ms, ascending.

    Raises:
        ExpectationError: cronsim cannot read `cron`, or the zone's UTC offset changes inside
            the span (daylight-saving rules are outside what this walker vouches for).

    """
    walker, zone = _walker(cron, timezone, after_ms)
    offset = _local(after_ms, zone).utcoffset()
    found: list[int] = []
    for moment in walker:
        at = _ms(moment)
        if at > through_ms:
            break
        if moment.utcoffset() != offset:
            msg = (
                f"{timezone}: UTC offset changes between {after_ms} and {at} ms; the independent"
                " walker does not decide daylight-saving wall times"
            )
            raise ExpectationError(msg)
        found.append(at)
    end_offset = _local(through_ms, zone).utcoffset()
    if end_offset != offset:
        msg = f"{timezone}: UTC offset changes between {after_ms} and {through_ms} ms"
        raise ExpectationError(msg)
    return found


def first_after(cron: str, timezone: str, after_ms: int) -> int:
    """Return the first occurrence strictly after `after_ms` (no daylight-saving change)."""
    walker, zone = _walker(cron, timezone, after_ms)
    moment = next(walker, None)
    if moment is None:
        msg = f"cron {cron!r} names no instant in the 50 years after {after_ms} ms"
        raise ExpectationError(msg)
    at = _ms(moment)
    if _local(after_ms, zone).utcoffset() != moment.utcoffset():
        msg = f"{timezone}: UTC offset changes between {after_ms} and {at} ms"
        raise ExpectationError(msg)
    return at
