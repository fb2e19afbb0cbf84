"""Database instants and spans as text for the console's pages, and the lateness chart as SVG.

Nothing here reads a clock (rule zero, DESIGN §1): every millisecond value was returned by the
database, the page's "now" included, so a relative time ("in 3.2 s") is the difference of two
database instants.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_cluster_postgres import SchedulePage

__all__ = ["LatenessChart", "format_instant", "format_relative", "format_span", "lateness_chart"]

_MS_PER_S = 1000
_MS_PER_MIN = 60_000
_MS_PER_H = 3_600_000


def format_instant(ms: int | None) -> str:
    """Write a database instant (epoch ms) as `YYYY-MM-DD HH:MM:SS.mmmZ` (UTC); '-' for None."""
    if ms is None:
        return "-"
    text = datetime.fromtimestamp(ms / _MS_PER_S, tz=UTC).isoformat(timespec="milliseconds")
    return text.replace("T", " ").replace("+00:00", "Z")


def format_span(ms: int | None) -> str:
    """Write a span of milliseconds as `850 ms`, `12.3 s`, `4.5 min` or `2.0 h`; '-' for None."""
    if ms is None:
        return "-"
    size = abs(ms)
    if size < _MS_PER_S:
        return f"{ms} ms"
    if size < _MS_PER_MIN:
        return f"{ms / _MS_PER_S:.1f} s"
    if size < _MS_PER_H:
        return f"{ms / _MS_PER_MIN:.1f} min"
    return f"{ms / _MS_PER_H:.1f} h"


def format_relative(ms: int | None, now_ms: int) -> str:
    """Write `ms` against the page's database instant: `in 3.2 s`, `4.0 s ago`; '-' for None."""
    if ms is None:
        return "-"
    delta = ms - now_ms
    return f"in {format_span(delta)}" if delta >= 0 else f"{format_span(-delta)} ago"


@dataclass(frozen=True)
class LatenessChart:
    """A polyline of admission lateness over the latest cron Runs, oldest on the left."""

    width: int
    height: int
    points: str
    max_ms: int
    count: int
    first_ms: int | None
    last_ms: int | None


def lateness_chart(page: SchedulePage, *, width: int = 640, height: int = 160) -> LatenessChart:
    """Scale the page's lateness points into an SVG polyline (no script, no external asset)."""
    ordered: Sequence[tuple[int, int]] = sorted(
        (point.scheduled_for_ms, point.lateness_ms) for point in page.lateness
    )
    top = max((lateness for _, lateness in ordered), default=0) or 1
    step = width / max(len(ordered) - 1, 1)
    coords = " ".join(
        f"{index * step:.1f},{height - lateness / top * height:.1f}"
        for index, (_, lateness) in enumerate(ordered)
    )
    return LatenessChart(
        width=width,
        height=height,
        points=coords,
        max_ms=top if ordered else 0,
        count=len(ordered),
        first_ms=ordered[0][0] if ordered else None,
        last_ms=ordered[-1][0] if ordered else None,
    )
