"""libfaketime for the database clock: finding the library, its control file, the server's env.

With `ThrowawayCluster(faketime=True)` the postmaster starts under libfaketime reading its offset
from a control file on every clock call (`FAKETIME_NO_CACHE=1`), so a new offset is seen at once by
open connections. The monotonic clock stays real (`FAKETIME_DONT_FAKE_MONOTONIC=1`), otherwise
PostgreSQL's timeouts and latches misbehave. `LIBFAKETIME_PATH` may point at the preload library
when it is not in a standard place.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import ThrowawayClusterError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FAKETIME_SETTINGS",
    "faketime_env",
    "find_faketime_library",
    "write_clock_file",
    "write_frozen_clock_file",
]

_FAKETIME_HINT = "install libfaketime (Debian/Ubuntu: `apt-get install faketime libfaketime`)"
_FAKETIME_CANDIDATES = (
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/faketime/libfaketime.so.1"),
    Path("/usr/local/lib/faketime/libfaketime.so.1"),
    Path("/usr/lib64/faketime/libfaketime.so.1"),
)
# Parallel workers would not share the offset reliably: a faked server runs without them.
FAKETIME_SETTINGS: Mapping[str, str] = {"max_parallel_workers_per_gather": "0"}
_CLOCK_FILE = "faketime.rc"


def find_faketime_library() -> Path:
    """Return the libfaketime preload library, or raise saying how to install it."""
    override = os.environ.get("LIBFAKETIME_PATH")
    candidates = [Path(override)] if override else list(_FAKETIME_CANDIDATES)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ThrowawayClusterError(
        f"libfaketime not found (looked at {', '.join(map(str, candidates))}): {_FAKETIME_HINT}"
    )


def write_clock_file(base_dir: Path, offset_ms: int) -> None:
    """Write the faketime offset the server reads on every clock call."""
    # libfaketime 0.9.10 reads "+1.500" / "-30.000" as a relative offset in (fractional)
    # seconds; os.replace makes the change atomic for a reader in the middle of a call.
    sign = "-" if offset_ms < 0 else "+"
    magnitude = abs(offset_ms)
    scratch = base_dir / f"{_CLOCK_FILE}.tmp"
    scratch.write_text(f"{sign}{magnitude // 1000}.{magnitude % 1000:03d}\n")
    scratch.chmod(0o644)
    scratch.replace(base_dir / _CLOCK_FILE)


def write_frozen_clock_file(base_dir: Path, at_ms: int) -> None:
    """Freeze the server's clock at `at_ms` (epoch ms): every clock call returns that instant.

    libfaketime reads an absolute "YYYY-MM-DD HH:MM:SS.fff" (no leading `@`) as a frozen clock,
    in the server's TZ, which `faketime_env` pins to UTC. Boundary tests use it to put the
    database exactly at an expiry instant, which a running clock cannot hit on purpose.
    """
    stamp = datetime.fromtimestamp(at_ms // 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    scratch = base_dir / f"{_CLOCK_FILE}.tmp"
    # libfaketime parses the fraction through a double, so ".014" can land on 13.999 ms; half a
    # millisecond more keeps floor(epoch * 1000) on the millisecond asked for.
    scratch.write_text(f"{stamp}.{at_ms % 1000:03d}500\n")
    scratch.chmod(0o644)
    scratch.replace(base_dir / _CLOCK_FILE)


def faketime_env(base_dir: Path) -> dict[str, str]:
    """Return the environment that starts a server under libfaketime reading `write_clock_file`."""
    return {
        "LD_PRELOAD": str(find_faketime_library()),
        "FAKETIME_TIMESTAMP_FILE": str(base_dir / _CLOCK_FILE),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # A frozen timestamp is read in the process's zone: pin it so it means UTC.
        "TZ": "UTC",
    }
