"""What a throwaway cluster writes on disk: initdb, its postgresql.conf lines, the faketime file.

Used by `ThrowawayCluster`; kept apart (like `_replication`) so the cluster module stays about
one server's life cycle, and every file format it writes is in one place.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._binaries import find_faketime_library
from ._processes import HOST, run_as, run_tool

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = [
    "faketime_env",
    "initdb",
    "write_clock_file",
    "write_frozen_clock_file",
    "write_settings",
]

# Settings every throwaway cluster gets; standbys and failover tests need the replication ones.
_BASE_SETTINGS: Mapping[str, str] = {
    "listen_addresses": HOST,
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "hot_standby": "on",
    "wal_keep_size": "128MB",
    "shared_buffers": "32MB",
    "max_connections": "100",
    "jit": "off",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "log_line_prefix": "%m [%p] %q%a ",
}
_NON_DURABLE_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
_FAKETIME_SETTINGS: Mapping[str, str] = {"max_parallel_workers_per_gather": "0"}
_CLOCK_FILE = "faketime.rc"


def _conf_line(key: str, value: str) -> str:
    escaped = value.replace("'", "''")
    return f"{key} = '{escaped}'\n"


def initdb(
    bin_dir: Path,
    data_dir: Path,
    base_dir: Path,
    *,
    superuser: str,
    password: str,
    os_user: str,
    durable: bool,
) -> None:
    """Create `data_dir` with SCRAM authentication and checksums, as `os_user`.

    The password travels in a file readable only by that user, removed afterwards.
    """
    pwfile = base_dir / "pwfile"
    pwfile.write_text(password + "\n")
    uid, gid = run_as(os_user)
    if uid is not None and gid is not None:
        os.chown(pwfile, uid, gid)
    pwfile.chmod(0o600)
    argv = [
        str(bin_dir / "initdb"),
        f"--pgdata={data_dir}",
        f"--username={superuser}",
        f"--pwfile={pwfile}",
        "--auth-local=scram-sha-256",
        "--auth-host=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C",
        "--data-checksums",  # pg_rewind and checksum verification need them
    ]
    if not durable:
        argv.append("--no-sync")
    try:
        run_tool(argv, cwd=base_dir, os_user=os_user)
    finally:
        pwfile.unlink(missing_ok=True)


def write_settings(
    data_dir: Path, extra: Mapping[str, str], *, durable: bool, faketime: bool
) -> None:
    """Append the throwaway settings, then the caller's `extra` (which win), to postgresql.conf."""
    settings: dict[str, str] = dict(_BASE_SETTINGS)
    if not durable:
        settings.update(_NON_DURABLE_SETTINGS)
    if faketime:
        settings.update(_FAKETIME_SETTINGS)
    settings.update(extra)
    with (data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("\n# --- ql3 throwaway cluster ---\n")
        conf.writelines(_conf_line(key, value) for key, value in settings.items())


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
