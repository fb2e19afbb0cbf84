"""The overlap policy on the command line and in schedule files, where no database is needed.

A bad `--overlap` / `--max-running` (or `overlap` / `max_running` key) exits 2 naming the flag or
key and the value before any connection is tried; the defaults are allow without a cap, and a cap
of one under skip and replace.
"""

from __future__ import annotations

from collections.abc import Callable  # noqa: TC003  # pytest resolves fixture annotations
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control._schedule_file import load_schedule_file
from ql3_runtime_core import OverlapPolicy

# A DSN no server answers: a command that tried to connect would fail differently.
_NOWHERE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--overlap", "queue"], "--overlap: 'queue' is not one of allow, skip, replace"),
        (["--overlap", "SKIP"], "--overlap: 'SKIP' is not one of allow, skip, replace"),
        (["--max-running", "0"], "--max-running: must be within 1..1000, got 0"),
        (["--overlap", "skip", "--max-running", "1001"],
         "--max-running: must be within 1..1000, got 1001"),
    ],
)  # fmt: skip
def test_schedule_add_overlap_errors_exit_2_before_connecting(
    usage_error: Callable[[list[str]], str], args: list[str], needle: str
) -> None:
    """A bad policy or cap is refused naming the flag and the value, before connecting."""
    line = usage_error(["schedule", "add", "x", "--cron", "* * * * *", *args, "--dsn", _NOWHERE])
    assert needle in line, line


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ('overlap = "later"', "schedule 'o': overlap: 'later' is not one of allow, skip, replace"),
        ("overlap = 1", "schedule 'o': overlap: 1 is not one of allow, skip, replace"),
        ("max_running = 0", "schedule 'o': max_running: must be within 1..1000, got 0"),
        ("max_running = true", "schedule 'o': max_running: True is not an integer"),
        ('max_running = "2"', "schedule 'o': max_running: '2' is not an integer"),
    ],
)
def test_apply_file_overlap_keys_are_checked_exit_2(
    usage_error: Callable[[list[str]], str], tmp_path: Path, entry: str, needle: str
) -> None:
    """A schedule file's overlap keys are named with their schedule, exit 2, nothing written."""
    path = tmp_path / "s.toml"
    path.write_text(f'[[schedule]]\nname = "o"\ncron = "* * * * *"\n{entry}\n')
    line = usage_error(["schedule", "apply", str(path), "--dsn", _NOWHERE])
    assert needle in line, line


def test_file_defaults_allow_without_a_cap_and_one_under_skip_and_replace(tmp_path: Path) -> None:
    """Left out: allow, no cap (as before); skip and replace without a cap get one live Run."""
    path = tmp_path / "s.toml"
    path.write_text(
        '[[schedule]]\nname = "a"\ncron = "* * * * *"\n'
        '[[schedule]]\nname = "s"\ncron = "* * * * *"\noverlap = "skip"\n'
        '[[schedule]]\nname = "r"\ncron = "* * * * *"\noverlap = "replace"\nmax_running = 3\n'
        '[[schedule]]\nname = "c"\ncron = "* * * * *"\nmax_running = 2\n'
    )
    got = {
        spec.name: (spec.execution.overlap, spec.execution.max_running)
        for spec in load_schedule_file(path)
    }
    assert got == {
        "a": (OverlapPolicy.ALLOW, None),
        "s": (OverlapPolicy.SKIP, 1),
        "r": (OverlapPolicy.REPLACE, 3),
        "c": (OverlapPolicy.ALLOW, 2),
    }
