"""A service running one transactional Python task, for `worker-transactional-sigkill`.

The task records its Run in `public.chaos_effects` and increments `public.chaos_counter` through
`context.connection`, inside the transaction that records the attempt succeeded, marks that it
wrote (a file `written/<run>-<attempt>` in its working folder, outside the database), then keeps
that transaction open for a random while (`pg_sleep`), so a SIGKILL often lands after the writes
and before the commit. Its writes must exist exactly once per succeeded Run, and never for an
attempt that did not succeed.

Usage: `python transactional_worker.py TASK --worker-id ID --lease-ms N --concurrency N
--grace-ms N --poll-interval-ms N --log-format json`, the DSN in `QL3_WORKER_DSN` (the same
flags as `ql3 worker`, which `chaos/workers.py` passes to both).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ql3_cluster_control import Worker, configure_logging, load_worker_settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_cluster_control import TaskContext

# Pause inside the task's transaction after its writes, seconds.
HOLD_S = (0.1, 0.6)
WRITTEN = Path("written")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the task's worker until SIGTERM (exit 0) or SIGKILL."""
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--log-format", default="json")
    for flag in ("--lease-ms", "--concurrency", "--grace-ms", "--poll-interval-ms"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args(argv)
    settings = load_worker_settings(
        id=args.worker_id,
        lease_ms=args.lease_ms,
        concurrency=args.concurrency,
        grace_ms=args.grace_ms,
        poll_interval_ms=args.poll_interval_ms,
        log_format=args.log_format,
        run_commands=False,
    )
    configure_logging(settings.log_format, level=settings.log_level, owner_id=settings.id)
    worker = Worker(settings)
    WRITTEN.mkdir(exist_ok=True)
    # Where in the transaction a kill lands, not a security decision.
    hold = random.Random()  # noqa: S311

    @worker.task(args.task, transactional=True)
    def count(context: TaskContext) -> None:
        conn = context.connection
        assert conn is not None, "a transactional task gets the connection"
        conn.execute(
            "INSERT INTO public.chaos_effects (run_id, attempt) VALUES (%s, %s)",
            (context.run_id, context.attempt),
        )
        conn.execute("UPDATE public.chaos_counter SET n = n + 1")
        (WRITTEN / f"{context.run_id}-{context.attempt}").touch()
        conn.execute("SELECT pg_sleep(%s)", (hold.uniform(*HOLD_S),))

    worker.install_signal_handlers()
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
