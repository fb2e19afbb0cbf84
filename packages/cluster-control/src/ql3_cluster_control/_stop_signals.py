"""SIGTERM and SIGINT as a graceful stop, for the long-running processes (`ql3 run`, `ql3 worker`).

One place for the handler both loops install, so they agree on which signals stop them and on
what a handler may do (record the signal's name and ask for the stop, nothing else).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

__all__ = ["install_stop_signals"]


def install_stop_signals(on_signal: Callable[[str], None]) -> None:
    """Call `on_signal` with the signal's name on SIGTERM or SIGINT (main thread only)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        # No logging here: the handler may interrupt a logging call; the loop reports it.
        on_signal(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
