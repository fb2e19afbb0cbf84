"""Crashing a postmaster and waiting for its orphaned backends, read from /proc.

A SIGKILLed postmaster leaves its backends running until they notice; a restart on the same data
dir must not find their shared memory, so the kit waits for every child it saw before the kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

__all__ = ["children_of", "crash", "wait_gone"]

_STOP_TIMEOUT_S = 30.0


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is parenthesised and may contain spaces; fields resume after it.
    return stat[stat.rindex(")") + 2 :].split()


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is `pid`, read from /proc (so it still works after the parent dies)."""
    children: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    """Tell whether `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = _STOP_TIMEOUT_S) -> None:
    """Wait until `pids` have exited; SIGKILL the stragglers after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout_s
        time.sleep(0.02)


def crash(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a postmaster, reap it, then wait until the backends it had are gone too."""
    if process.poll() is not None:
        return
    children = children_of(process.pid)
    process.kill()
    process.wait()
    wait_gone(children)
