"""PrivateServer against real PostgreSQL: one server started, reached over SCRAM, always removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from ql3_cluster_postgres import PrivateServer, PrivateServerError, find_postgres_bin_dir


def _pid_alive(pid: int) -> bool:
    # The server's parent reaps it on stop(), so a stopped server leaves no /proc entry at all.
    return Path(f"/proc/{pid}").exists()


def _run_script(script: str) -> subprocess.CompletedProcess[str]:
    """Run `script` in a fresh interpreter (its exit runs the atexit handlers under test)."""
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )


def test_find_postgres_bin_dir_has_the_server_tools() -> None:
    """The binary lookup finds a folder with initdb, postgres and pg_ctl."""
    folder = find_postgres_bin_dir()
    for tool in ("initdb", "postgres", "pg_ctl"):
        assert os.access(folder / tool, os.X_OK)


def test_start_and_stop_leave_no_process_and_no_folder() -> None:
    """A started server answers over TCP on 127.0.0.1; stop() ends it and removes its folder."""
    server = PrivateServer(name="lifecycle").start()
    base: Path = server.base_dir
    pid = server.pid
    try:
        with psycopg.connect(server.dsn()) as conn:
            row = conn.execute("SELECT current_setting('listen_addresses')").fetchone()
            assert row == ("127.0.0.1",)
            assert conn.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
        assert server.host == "127.0.0.1"
        assert server.running
        assert _pid_alive(pid)
    finally:
        server.stop()
    assert not _pid_alive(pid)
    assert not base.exists()
    assert not server.running
    server.stop()  # idempotent


def test_settings_reach_the_server_and_durability_is_the_default() -> None:
    """The caller's settings are applied and, without a test kit, fsync stays on."""
    with (
        PrivateServer(name="settings", settings={"max_connections": "42"}) as server,
        psycopg.connect(server.dsn()) as conn,
    ):
        assert conn.execute("SHOW max_connections").fetchone() == ("42",)
        assert conn.execute("SHOW fsync").fetchone() == ("on",)


def test_wrong_password_is_refused() -> None:
    """TCP connections authenticate with SCRAM: a wrong password cannot connect."""
    with PrivateServer(name="scram") as server:
        bad = server.dsn(password="wrong")  # noqa: S106 - deliberately wrong
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(bad, connect_timeout=5)


def test_run_tool_runs_a_server_tool_as_the_os_user() -> None:
    """run_tool runs a tool of the server's bin folder and returns its output."""
    with PrivateServer(name="tool") as server:
        status = server.run_tool("pg_ctl", "status", "-D", str(server.data_dir))
    assert "server is running" in status


def test_startup_failure_reports_the_server_log() -> None:
    """A server that cannot start raises an error quoting the server log's tail."""
    server = PrivateServer(name="broken", settings={"shared_buffers": "no-such-size"})
    with pytest.raises(PrivateServerError, match="shared_buffers"):
        server.start()
    with pytest.raises(PrivateServerError, match="not started"):
        _ = server.base_dir


_ABANDON_SCRIPT = """
from ql3_cluster_postgres import PrivateServer
server = PrivateServer(name="abandoned").start()
print(server.base_dir, server.pid, flush=True)
"""


def test_interpreter_exit_stops_a_forgotten_server() -> None:
    """A server never stopped by its program is stopped and removed when the interpreter exits."""
    result = _run_script(_ABANDON_SCRIPT)
    assert result.returncode == 0, result.stderr
    base, pid = result.stdout.split()
    assert not _pid_alive(int(pid))
    assert not Path(base).exists()


_FORK_SCRIPT = """
import os, sys
import psycopg
from ql3_cluster_postgres import PrivateServer
with PrivateServer(name="forked") as server:
    child = os.fork()
    if child == 0:
        sys.exit(0)  # a normal exit runs the child's atexit handlers
    os.waitpid(child, 0)
    with psycopg.connect(server.dsn()) as conn:
        print(conn.execute("SELECT 'still up'").fetchone()[0])
"""


def test_forked_child_exit_leaves_the_parents_server_alone() -> None:
    """A forked child's interpreter exit does not stop the servers its parent started."""
    result = _run_script(_FORK_SCRIPT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "still up"


def test_unusable_binaries_are_a_clear_error(tmp_path: Path) -> None:
    """Binaries the server's OS user cannot execute raise an error saying so, and leave nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("initdb", "postgres", "pg_ctl"):
        (bin_dir / tool).write_text("not a program\n")
        (bin_dir / tool).chmod(0o644)
    server = PrivateServer(name="nobin", bin_dir=bin_dir)
    with pytest.raises(PrivateServerError, match=r"cannot run .*initdb"):
        server.start()
    assert not server.running
