"""The task's side effect happens once per Run id, whatever the attempt (no database needed)."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from consumer_service import deliver
from ql3_cluster_control import TaskContext

if TYPE_CHECKING:
    from pathlib import Path


def _context(run_id: int, attempt: int) -> TaskContext:
    return TaskContext(
        run_id=run_id,
        attempt=attempt,
        attempt_id=100 + attempt,
        scheduled_for_ms=1_700_000_000_000,
        task_name="invoices",
        payload={},
        worker_id="w",
        timeout_s=60.0,
        cancelled=threading.Event(),
    )


def test_a_second_attempt_of_a_delivered_run_sends_nothing(tmp_path: Path) -> None:
    """The first attempt writes the Run's invoice; a retry of the same Run leaves it as it was."""
    assert deliver(tmp_path, _context(7, 1))
    assert not deliver(tmp_path, _context(7, 2))
    assert deliver(tmp_path, _context(8, 1))
    first = json.loads((tmp_path / "run-7.json").read_text(encoding="utf-8"))
    assert (first["run_id"], first["attempt"]) == (7, 1)
