"""The oracle's occurrences: cronsim walking the zone rules the database recorded.

The oracle must not share the code it checks, so instants never come from QL3's cron engine:
cronsim (a separate implementation) names them, in a zone built from the TZif bytes the database
stores for the revision's zone rules version (DESIGN §9: verify judges each revision with the
rules it names). The node's own zone files are never read, so the verdict is the same on every
machine and a history that spans a rules switch is judged span by span.

cronsim's iterator yields the first match strictly after its start (it drops the start's fraction
of a second, then ticks), the "first occurrence strictly after" of DESIGN §4; its handling of
daylight-saving gaps and repeats (a fixed wall time fires once, at the first valid instant; an
interval-like expression follows absolute time) is the rule DESIGN §4 states.
"""

from __future__ import annotations

import io
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

__all__ = ["OracleError", "Walker"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A walk longer than this is a history the oracle was not built for (a test history spans
# minutes to days of second-level schedules); refusing beats judging for minutes.
_MAX_OCCURRENCES = 5_000_000


class OracleError(AssertionError):
    """The oracle cannot state an expectation exactly (missing rule data, an unreadable cron)."""


def zone_from_tzif(name: str, tzif: bytes | None) -> tzinfo:
    """Return the zone `name` as the stored TZif bytes define it (UTC needs none)."""
    if tzif is None:
        if name in {"UTC", "Etc/UTC"}:
            return UTC
        msg = f"no stored zone rule data for zone {name!r}"
        raise OracleError(msg)
    return ZoneInfo.from_file(io.BytesIO(tzif), key=name)


def _local(ms: int, zone: tzinfo) -> datetime:
    # Epoch arithmetic on a database instant, not a clock read (rule zero).
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(zone)


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


class Walker:
    """The occurrences of one cron expression in one zone, walked once and kept sorted."""

    def __init__(self, cron: str, zone: tzinfo) -> None:
        """Check that cronsim reads `cron` (an unreadable cron is the caller's finding)."""
        self.cron = cron
        self.zone = zone
        try:
            CronSim(cron, _local(0, zone))
        except CronSimError as exc:
            msg = f"cronsim cannot read cron {cron!r}: {exc}"
            raise OracleError(msg) from exc

    def between(self, low_ms: int, high_ms: int) -> list[int]:
        """Return every occurrence t with low_ms <= t < high_ms, ascending."""
        found: list[int] = []
        if high_ms <= low_ms:
            return found
        for moment in CronSim(self.cron, _local(low_ms - 1, self.zone)):
            at = _ms(moment)
            if at >= high_ms:
                break
            found.append(at)
            if len(found) > _MAX_OCCURRENCES:
                msg = f"cron {self.cron!r} has over {_MAX_OCCURRENCES} occurrences in the span"
                raise OracleError(msg)
        return found

    def first_after(self, after_ms: int) -> int | None:
        """Return the first occurrence strictly after `after_ms` (None: cronsim finds none)."""
        moment = next(iter(CronSim(self.cron, _local(after_ms, self.zone))), None)
        return None if moment is None else _ms(moment)

    def is_occurrence(self, at_ms: int) -> bool:
        """Tell whether `at_ms` is an occurrence."""
        return self.first_after(at_ms - 1) == at_ms


def count_in(sorted_ms: list[int], first_ms: int, last_ms: int) -> int:
    """Return how many of `sorted_ms` lie in [first_ms, last_ms]."""
    return bisect_right(sorted_ms, last_ms) - bisect_left(sorted_ms, first_ms)
