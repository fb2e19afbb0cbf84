"""One worker process of the worker benchmark: a QL3 `Worker`, or the bare SKIP LOCKED loop.

`python -m bench._worker_child ql3 --dsn DSN --id ID [...]` runs the product's `Worker` with a
registered no-op Python task `noop` (and, with `--commands`, command tasks), its logs at INFO
(the product's default) on stderr, until SIGTERM.

`python -m bench._worker_child bare --dsn DSN --id ID [...]` is the baseline: the fewest
statements that write what QL3 writes per attempt (`bench/sql/worker_bare_take.sql`, the rows of
`ql3.worker_take_attempts_v2`; `bench/sql/worker_bare_finish.sql`, those of
`ql3.worker_finish_attempt_v1` for a success), as the database owner: one take statement of up
to `--batch` attempts in its own transaction, then for each attempt the no-op call and one
finish statement in its own transaction, in turn. No pool, no lease renewals, no abandon sweep,
no threads, no logs, no argument checks; when the take finds nothing it sleeps 5 ms. Its session
runs with `enable_sort = off`, as QL3's take does (migration 0016), so its pick never sorts the
whole queue because statistics lag a backlog. It is an OS process like a worker, so both pay
the same for the interpreter.

Rule zero: every recorded time is the database's (`clock_timestamp()` in the statements).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from types import FrameType

    from ql3_cluster_control import TaskContext

__all__ = ["main"]

NOOP_TASK: Final = "noop"
_LEASE_MS: Final = 30_000
_IDLE_SLEEP_S: Final = 0.005


def _noop(_context: TaskContext | None = None) -> None:
    """Do nothing: both sides run it, so what is measured is the execution machinery."""


def _run_ql3(args: argparse.Namespace) -> int:
    from ql3_cluster_control import (  # noqa: PLC0415 - the bare side never loads the product
        LogFormat,
        Worker,
        WorkerSettings,
        configure_logging,
    )

    settings = WorkerSettings(
        dsn=args.dsn,
        id=args.id,
        concurrency=args.concurrency,
        poll_interval_ms=args.poll_ms,
        listen=not args.no_listen,
        run_commands=args.commands,
        application_name=f"bw-{args.id}",
    )
    configure_logging(LogFormat.JSON, level="INFO", owner_id=settings.id)
    worker = Worker(settings)
    if not args.commands:
        worker.register(NOOP_TASK, _noop)
    worker.install_signal_handlers()
    return worker.run()


class _Stop:
    """Set by SIGTERM/SIGINT; the bare loop ends after the attempt in progress."""

    requested = False

    @classmethod
    def handle(cls, _signum: int, _frame: FrameType | None) -> None:
        cls.requested = True


def _run_bare(args: argparse.Namespace) -> int:
    from ._sql import connect, load_sql  # noqa: PLC0415

    signal.signal(signal.SIGTERM, _Stop.handle)
    signal.signal(signal.SIGINT, _Stop.handle)
    take, finish = load_sql("worker_bare_take"), load_sql("worker_bare_finish")
    token = uuid.uuid4()
    params = {
        "worker_id": args.id,
        "lease_token": token,
        "lease_ms": _LEASE_MS,
        "batch_limit": args.batch,
    }
    # The pick walks the queue's index, not a sort of the whole queue, whatever the statistics
    # (as QL3's take, migration 0016): a pass slowed 3x by lagging ones would flatter QL3's ratio.
    with connect(args.dsn, application_name=f"bw-{args.id}", options="-c enable_sort=off") as conn:
        while not _Stop.requested:
            taken = conn.execute(take, params).fetchall()
            if not taken:
                time.sleep(_IDLE_SLEEP_S)
                continue
            for row in taken:
                _noop()
                conn.execute(finish, {"attempt_id": row["attempt_id"], "lease_token": token})
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench._worker_child")
    parser.add_argument("mode", choices=("ql3", "bare"))
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--concurrency", type=int, default=4, help="ql3: runner slots")
    parser.add_argument("--poll-ms", type=int, default=1_000, help="ql3: poll interval")
    parser.add_argument("--no-listen", action="store_true", help="ql3: poll only")
    parser.add_argument("--commands", action="store_true", help="ql3: command tasks, no Python")
    parser.add_argument("--batch", type=int, default=4, help="bare: attempts per take")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one worker process until SIGTERM."""
    args = _parser().parse_args(argv)
    return _run_ql3(args) if args.mode == "ql3" else _run_bare(args)


if __name__ == "__main__":
    sys.exit(main())
