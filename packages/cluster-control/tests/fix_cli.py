"""The `ql3` command line run in-process, without a database (`cli`, `usage_error` fixtures)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_cluster_control import main
from typer.testing import CliRunner


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """Return a runner with no QL3_* variables in the environment."""
    for key in list(os.environ):
        if key.startswith("QL3_"):
            monkeypatch.delenv(key)
    return CliRunner()


@pytest.fixture
def usage_error(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[list[str]], str]:
    """Return a runner of the real entry point (`main`, as the `ql3` script) that wants exit 2.

    It requires exactly one `ql3: error:` line on stderr and returns it; click's own usage
    errors (a flag's range) are rendered by `main` too, which CliRunner would bypass.
    """
    assert cli  # no QL3_* variables in the environment

    def run(args: list[str]) -> str:
        monkeypatch.setattr(sys, "argv", ["ql3", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        stderr = capsys.readouterr().err
        assert exited.value.code == 2, (exited.value.code, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith("ql3: error: ")
        return lines[0]

    return run
