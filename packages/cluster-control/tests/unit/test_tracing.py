"""Traces (the `otel` extra), read back with the OpenTelemetry SDK's in-memory exporter.

A Coordinator cycle over the fake store yields `ql3.cycle` holding `ql3.claim` and `ql3.commit`
(with the admitted Run ids); a real `Worker` loop over a stub repository yields `ql3.take` (the
taken Run id), `ql3.execute` and inside it `ql3.finish`, and the command it runs sees a
`TRACEPARENT` naming its execution span. No database is needed: the spans are what is tested.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import opentelemetry.trace
import pytest
from fake_attempts import taken_attempt
from fake_repository import FakeRepository
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ql3_cluster_control import Coordinator, Worker, WorkerSettings
from ql3_runtime_core import (
    AbandonedAttempt,
    FinishedAttempt,
    TakenAttempt,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path
    from uuid import UUID

    from opentelemetry.sdk.trace import ReadableSpan


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[ReadableSpan]]]:
    """Route QL3's tracer to an SDK provider with an in-memory exporter; yield its reader."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(
        opentelemetry.trace, "get_tracer", lambda name, *_, **__: provider.get_tracer(name)
    )
    yield lambda: list(exporter.get_finished_spans())
    provider.shutdown()


def _named(found: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in found if span.name == name]


def test_a_cycle_traces_its_claim_and_its_commit_with_the_run_ids(
    spans: Callable[[], list[ReadableSpan]],
) -> None:
    """ql3.claim and ql3.commit are children of ql3.cycle; the commit names the Runs."""
    repo = FakeRepository()
    repo.add(first_due_ms=repo.now_ms - 1)
    coordinator = Coordinator(repo, owner_id="replica-a", lease_ms=5_000)
    result = coordinator.run_cycle()
    assert result.summary.admitted == 1
    found = spans()
    (cycle,) = _named(found, "ql3.cycle")
    claims = _named(found, "ql3.claim")
    (commit,) = _named(found, "ql3.commit")
    assert claims
    assert cycle.context is not None
    for child in (*claims, commit):
        assert child.parent is not None
        assert child.parent.span_id == cycle.context.span_id
    assert commit.attributes is not None
    assert commit.attributes["ql3.run_ids"] == tuple(run.run_id for run in repo.runs)
    assert (cycle.attributes or {})["ql3.owner_id"] == "replica-a"


class _OneAttempt:
    """A worker repository that hands out one command attempt, then nothing; records finishes."""

    def __init__(self, command: str) -> None:
        self.attempt = taken_attempt(command, task_name="nightly", attempt_number=1, payload={})
        self.handed = False
        self.finished = threading.Event()

    def check_schema(self) -> int:
        return 13

    def take_attempts(self, **_: Any) -> list[TakenAttempt]:
        if self.handed:
            return []
        self.handed = True
        return [self.attempt]

    def renew_leases(self, _token: UUID, attempt_ids: Sequence[int], _lease_ms: int) -> Any:
        return dict.fromkeys(attempt_ids, 30000)

    def settle_taken_attempts(self, *_: Any) -> list[int]:
        return []

    def finish_attempt(self, attempt_id: int, *_: Any, **__: Any) -> FinishedAttempt:
        self.finished.set()
        return FinishedAttempt(attempt_id=attempt_id, recorded=True, finished_at_ms=1)

    def finish_in_transaction(self, *_: Any, **__: Any) -> FinishedAttempt:  # pragma: no cover
        raise NotImplementedError

    def release_attempts(self, *_: Any) -> list[int]:
        return []

    def abandon_expired_attempts(self, _limit: int) -> list[AbandonedAttempt]:
        return []

    def close(self) -> None:
        """Nothing to close."""


def test_a_worker_traces_take_execute_finish_and_passes_traceparent(
    spans: Callable[[], list[ReadableSpan]], tmp_path: Path
) -> None:
    """The command's TRACEPARENT is its execution span; the finish is a child of it."""
    out = tmp_path / "traceparent"
    stub = _OneAttempt(f'printf %s "$TRACEPARENT" > {out}')
    worker = Worker(
        WorkerSettings(dsn="host=unused", id="w", poll_interval_ms=20),
        repository_factory=lambda: stub,
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert stub.finished.wait(20)
    finally:
        worker.request_stop()
        thread.join(20)
    found = spans()
    takes = [
        span for span in _named(found, "ql3.take") if (span.attributes or {}).get("ql3.run_ids")
    ]
    (take,) = takes
    assert (take.attributes or {})["ql3.run_ids"] == (7,)
    (execute,) = _named(found, "ql3.execute")
    (finish,) = _named(found, "ql3.finish")
    assert execute.context is not None
    assert (execute.attributes or {})["ql3.run_id"] == 7
    assert finish.parent is not None
    assert finish.parent.span_id == execute.context.span_id
    assert (finish.attributes or {})["ql3.outcome"] == "succeeded"
    version, trace_id, span_id, _ = out.read_text().split("-")
    assert version == "00"
    assert int(trace_id, 16) == execute.context.trace_id
    assert int(span_id, 16) == execute.context.span_id
