"""A command watched from its runner's thread: its exit wakes the wait, its output is kept.

Real processes (`/bin/sh`), no database. Each check has its control: the exit wake-up is shown
against the same wait with the pidfd taken away, and the output read during the SIGTERM grace
against what a pipe nobody reads does to a command that writes as it ends.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from fake_attempts import run_command, taken_attempt
from ql3_cluster_control.worker import _command_output
from ql3_cluster_control.worker._command_output import CommandOutput
from ql3_runtime_core import AttemptOutcome, AttemptResult

if TYPE_CHECKING:
    from collections.abc import Iterator

# Long enough that a wait ending before it can only have been woken by the exit.
_LONG_WAIT_S = 30.0


def _spawn(command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _exited(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


# The shell closes its output at once, then lives 0.3 s: only its exit can end a wait after that.
_QUIET = "exec >/dev/null 2>&1; sleep 0.3"


@pytest.fixture
def quiet() -> Iterator[subprocess.Popen[bytes]]:
    """Yield a shell that closes its output and exits 0.3 s later; kill and reap it after."""
    process = _spawn(_QUIET)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _past_the_pipe(process: subprocess.Popen[bytes]) -> CommandOutput:
    """Watch `process`, and read its output's end (it closes its pipe first thing)."""
    assert process.stdout is not None
    output = CommandOutput(process.pid, process.stdout, name="ql3-output-test")
    while output.pipe_open():
        output.wait(0.05)
    assert not _exited(process.pid), "the shell ended before the check began: machine too slow"
    return output


def test_the_exit_ends_the_wait(quiet: subprocess.Popen[bytes]) -> None:
    """With a pidfd (Linux 5.3+), a long wait returns once the shell has exited."""
    output = _past_the_pipe(quiet)
    try:
        assert output.sees_exit, "no pidfd: this kernel predates Linux 5.3"
        started = time.monotonic()
        output.wait(_LONG_WAIT_S)
        assert _exited(quiet.pid)
        assert time.monotonic() - started < _LONG_WAIT_S / 2, "the exit did not end the wait"
    finally:
        output.close()


def test_control_without_a_pidfd_the_wait_runs_to_its_timeout(
    monkeypatch: pytest.MonkeyPatch, quiet: subprocess.Popen[bytes]
) -> None:
    """Control: the same wait with the pidfd taken away is not woken by the exit."""
    monkeypatch.setattr(_command_output, "_pidfd", lambda _pid: None)
    output = _past_the_pipe(quiet)
    try:
        assert not output.sees_exit
        started = time.monotonic()
        output.wait(1.0)
        assert _exited(quiet.pid)
        assert time.monotonic() - started >= 0.9, "woken although nothing watched the exit"
    finally:
        output.close()


def _run(command: str, *, timeout_ms: int = 60_000) -> AttemptResult:
    attempt = taken_attempt(command, timeout_ms=timeout_ms, lease_expires_at_ms=60_000)
    return run_command(attempt, lease_s=60, within_s=30)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "timer"])
def test_a_command_ends_recorded_with_its_output_either_way(
    monkeypatch: pytest.MonkeyPatch, *, pidfd: bool
) -> None:
    """Where the kernel has no pidfd the runner falls back to looking for the exit on a timer."""
    if not pidfd:
        monkeypatch.setattr(_command_output, "_pidfd", lambda _pid: None)
    result = _run("echo one; echo two >&2; exit 4")
    assert (result.outcome, result.exit_code) == (AttemptOutcome.FAILED, 4)
    assert result.output_tail == "one\ntwo\n"


# The shell ignores nothing: on SIGTERM it writes 200 000 bytes (three pipes' worth) and exits 3.
_WRITES_AS_IT_ENDS = "trap 'head -c 200000 /dev/zero | tr \"\\0\" y; exit 3' TERM; sleep 60 & wait"


def test_output_written_during_the_grace_is_read_so_the_command_can_end() -> None:
    """Timed out: SIGTERM, and the command's last words are read while it ends, so it exits 3.

    Were the pipe left unread during the grace, the writer would block on the full pipe and the
    group be SIGKILLed after `KILL_GRACE_S`: exit code -9 (the control below).
    """
    result = _run(_WRITES_AS_IT_ENDS, timeout_ms=1_000)
    assert (result.outcome, result.exit_code) == (AttemptOutcome.TIMED_OUT, 3)
    assert (result.output_tail or "").endswith("yyyy")


def test_control_a_pipe_nobody_reads_blocks_the_same_command() -> None:
    """Control: the same command with its pipe unread until it ends is SIGKILLed (code -9)."""
    process = _spawn(_WRITES_AS_IT_ENDS)
    try:
        time.sleep(0.2)  # let the shell set its trap (pacing only; the check is the exit code)
        os.killpg(process.pid, 15)
        try:
            code = process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            code = process.wait()
        assert code == -9
    finally:
        if process.stdout is not None:
            process.stdout.close()
