"""The service: one Python task registered with QL3's `Worker`, idempotent by the Run id.

What the task "sends" is a file in an outbox folder named after the Run id, created exclusively:
a second attempt of the same Run (after a lost lease, say) finds the file and sends nothing, so
the Run id QL3 hands the task is what makes the side effect happen once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ql3_cluster_control import (
    LogFormat,
    TaskContext,
    Worker,
    configure_logging,
    load_worker_settings,
)

__all__ = ["OUTBOX_VARIABLE", "TASK_NAME", "build_worker", "deliver", "main"]

TASK_NAME = "invoices"  # the schedule's name: `ql3 schedule add invoices --cron ...`
# The service's own setting: not a QL3_* name, which QL3 would refuse as unknown.
OUTBOX_VARIABLE = "CONSUMER_OUTBOX"


def deliver(outbox: Path, context: TaskContext) -> bool:
    """Write the Run's invoice into `outbox` once; False when this Run was delivered already."""
    message = {
        "run_id": context.run_id,
        "attempt": context.attempt,
        "scheduled_for_ms": context.scheduled_for_ms,
        "worker_id": context.worker_id,
    }
    try:
        with (outbox / f"run-{context.run_id}.json").open("x", encoding="utf-8") as handle:
            json.dump(message, handle)
    except FileExistsError:
        return False
    return True


def build_worker(outbox: Path) -> Worker:
    """Build a worker for this service's Python task only (settings from `QL3_WORKER_*`)."""
    worker = Worker(load_worker_settings(run_commands=False))

    @worker.task(TASK_NAME)
    def send_invoices(context: TaskContext) -> None:
        deliver(outbox, context)

    return worker


def main() -> int:
    """Run the worker until SIGTERM/SIGINT; its exit code (0 after a graceful stop)."""
    outbox = Path(os.environ.get(OUTBOX_VARIABLE, "outbox"))
    outbox.mkdir(parents=True, exist_ok=True)
    worker = build_worker(outbox)
    configure_logging(LogFormat.JSON, owner_id=worker.worker_id)
    worker.install_signal_handlers()
    return worker.run()
