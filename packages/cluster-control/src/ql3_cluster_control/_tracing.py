"""Traces (the `otel` extra): OpenTelemetry spans of one Run from admission to exit.

A Coordinator's cycle (`ql3.cycle`) holds its claim statements (`ql3.claim`) and commits
(`ql3.commit`, with the admitted Run ids as `ql3.run_ids`); a worker's take (`ql3.take`, the
taken Run ids), each attempt's execution (`ql3.execute`, `ql3.run_id`, `ql3.attempt_id`) and the
statement that records its end (`ql3.finish`). A command runs with `TRACEPARENT` set to its
execution span, so the work it does joins the same trace. QL3 only uses the OpenTelemetry API:
the process that embeds it (or `opentelemetry-instrument ql3 ...`) configures the SDK and the
exporter. Without the API installed, or without an SDK configured, nothing is recorded and each
call here costs next to nothing. Span times are the tracer's (the SDK's clock), never used for
any decision (rule zero holds for scheduling; traces only observe).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

try:
    from opentelemetry import propagate, trace
except ImportError:  # pragma: no cover - the `otel` extra is not installed
    trace = None  # type: ignore[assignment]
    propagate = None  # type: ignore[assignment]

__all__ = ["Attribute", "add_attributes", "span", "traceparent"]

Attribute = str | int | bool | float | Sequence[int]
_TRACER: Final = "ql3"


@contextlib.contextmanager
def span(name: str, **attributes: Attribute | None) -> Iterator[object | None]:
    """Run the block inside span `name` (a child of the current one); None without the API."""
    if trace is None:
        yield None
        return
    tracer = trace.get_tracer(_TRACER)
    kept = {f"ql3.{key}": value for key, value in attributes.items() if value is not None}
    with tracer.start_as_current_span(name, attributes=kept) as current:
        yield current


def add_attributes(current: object | None, **attributes: Attribute | None) -> None:
    """Set attributes learnt inside the span (the Run ids a take or a commit returned)."""
    if trace is None or current is None:
        return
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(f"ql3.{key}", value)  # type: ignore[attr-defined]


def traceparent() -> str | None:
    """Return the W3C `traceparent` of the current span (for a command's environment), or None."""
    if propagate is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")
