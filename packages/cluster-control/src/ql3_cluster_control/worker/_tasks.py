"""The Python tasks a worker runs: registered callables by task name, plain or transactional.

A schedule without a command is a Python task, run only by a worker that registered a callable
under the schedule's (task's) name. Registration is checked at once (a name no schedule can
have, a name registered twice, something not callable), never when an attempt comes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ql3_cluster_postgres import SCHEDULE_NAME_MAX_LENGTH

from ql3_cluster_control._config import ConfigurationError

if TYPE_CHECKING:
    from ._python_runner import TaskFunction

__all__ = ["TaskRegistry"]


def _check_task_name(name: str) -> None:
    if not 1 <= len(name) <= SCHEDULE_NAME_MAX_LENGTH:
        msg = f"task name: 1..{SCHEDULE_NAME_MAX_LENGTH} characters, got {len(name)}"
        raise ConfigurationError(msg)
    if name != name.strip() or not name.isprintable():
        msg = f"task name: printable, without outer whitespace, got {name!r}"
        raise ConfigurationError(msg)


class TaskRegistry:
    """Callables by task name, each with whether it runs in the transaction recording success."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[TaskFunction, bool]] = {}
        self._lock = threading.Lock()

    def register(self, name: str, function: TaskFunction, *, transactional: bool) -> None:
        """Add `function` under `name` (see `Worker.register`)."""
        _check_task_name(name)
        if not callable(function):
            msg = f"task {name!r}: {function!r} is not callable"
            raise ConfigurationError(msg)
        with self._lock:
            if name in self._tasks:
                msg = f"task {name!r}: a callable is registered already"
                raise ConfigurationError(msg)
            self._tasks[name] = (function, transactional)

    @property
    def names(self) -> tuple[str, ...]:
        """The registered task names, sorted."""
        with self._lock:
            return tuple(sorted(self._tasks))

    def lookup(self, name: str, worker_id: str) -> tuple[TaskFunction, bool]:
        """Return the callable of `name` (one that fails naming it, if none: never expected)."""
        with self._lock:
            registered = self._tasks.get(name)
        if registered is not None:
            return registered

        def unregistered(_context: object) -> None:  # pragma: no cover - take filters by name
            msg = f"no callable registered for task {name!r} on worker {worker_id!r}"
            raise LookupError(msg)

        return unregistered, False
