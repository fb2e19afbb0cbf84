"""OS process plumbing for the private server: run tools as the unprivileged user, spawn, stop.

PostgreSQL refuses to run as root, so when this process is root every tool and the postmaster run
as an unprivileged OS user (`postgres` by default).
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from ql3_cluster_postgres._errors import PrivateServerError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "free_port",
    "log_tail",
    "run_as",
    "run_tool",
    "spawn_server",
    "stop_server",
    "tool_env",
]

HOST = "127.0.0.1"
_TOOL_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the caller retries on races)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def run_as(os_user: str) -> tuple[int | None, int | None]:
    """Return (uid, gid) of `os_user` when this process is root, else (None, None)."""
    if os.geteuid() != 0:
        return None, None
    try:
        entry = pwd.getpwnam(os_user)
    except KeyError as exc:
        raise PrivateServerError(
            f"running as root, PostgreSQL needs an unprivileged OS user; user {os_user!r} does"
            f" not exist (create it: `useradd --system {os_user}`)"
        ) from exc
    return entry.pw_uid, entry.pw_gid


def tool_env(home: Path) -> dict[str, str]:
    """Build the environment for PostgreSQL tools: ours minus libpq and preload variables."""
    env = {
        key: value
        for key, value in os.environ.items()
        # PG*: a caller's PGHOST/PGPORT/PGDATA would point the tools at another server.
        # LD_PRELOAD/FAKETIME: a test's clock shim must reach only the server it was meant for.
        if not key.startswith(("PG", "LD_PRELOAD", "FAKETIME"))
    }
    # initdb fails or picks odd collations under a locale the machine lacks; C always exists.
    env["LC_ALL"] = "C"
    env["HOME"] = str(home)
    return env


def run_tool(
    argv: list[str], *, cwd: Path, os_user: str, env: Mapping[str, str] | None = None
) -> str:
    """Run a PostgreSQL tool to completion as `os_user`; return stdout or raise with stderr."""
    uid, gid = run_as(os_user)
    try:
        result = subprocess.run(  # noqa: S603 - argv built from fixed tool names
            argv,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env) if env is not None else tool_env(cwd),
            user=uid,
            group=gid,
            # Dropping to the OS user must drop root's supplementary groups too.
            extra_groups=[] if uid is not None else None,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise _exec_error(argv[0], os_user, exc) from exc
    if result.returncode != 0:
        raise PrivateServerError(
            f"{Path(argv[0]).name} failed with exit code {result.returncode}:"
            f" {(result.stderr or result.stdout).strip()}"
        )
    return result.stdout


def spawn_server(
    argv: list[str], *, cwd: Path, os_user: str, env: Mapping[str, str], log_path: Path
) -> subprocess.Popen[bytes]:
    """Start the postmaster in its own session, stdout and stderr appended to `log_path`."""
    uid, gid = run_as(os_user)
    try:
        with log_path.open("ab") as log:
            return subprocess.Popen(  # noqa: S603 - fixed binary, our own arguments
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env),
                user=uid,
                group=gid,
                extra_groups=[] if uid is not None else None,
                start_new_session=True,  # a Ctrl-C in pytest must not reach the server first
            )
    except OSError as exc:
        raise _exec_error(argv[0], os_user, exc) from exc


def _exec_error(program: str, os_user: str, exc: BaseException) -> PrivateServerError:
    who = f"OS user {os_user!r}" if os.geteuid() == 0 else "this user"
    return PrivateServerError(
        f"cannot run {program} as {who}: {exc}; every folder on the way to the PostgreSQL"
        " binaries and the cluster folder must be readable and traversable by that user"
    )


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop a postmaster with SIGQUIT (immediate shutdown: nothing to keep); SIGKILL if it hangs.

    The postmaster exits only after its backends have, so no server memory outlives the wait.
    """
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGQUIT)
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log_tail(path: Path, lines: int = 40) -> str:
    """Return the last `lines` lines of a server log."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])
