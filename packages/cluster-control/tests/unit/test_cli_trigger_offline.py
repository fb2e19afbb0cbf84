"""`ql3 schedule trigger` with no database: a bad argument is refused before connecting."""

from __future__ import annotations

import pytest
from ql3_cluster_control import cli_app as app
from typer.testing import CliRunner  # noqa: TC002  # pytest resolves fixture annotations


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--payload", "{not json"], "--payload"),
        (["--payload", "[1, 2]"], "must be a JSON object"),
        (["--request-id", "has space"], "request_id"),
        (["--request-id", "-leading-dash"], "request_id"),
    ],
)
def test_trigger_argument_errors_exit_2_before_connecting(
    cli: CliRunner, args: list[str], needle: str
) -> None:
    """A bad payload or request id is one line naming it, exit 2; no database is reached."""
    # Port 1 on loopback: nothing listens, so connecting would fail with exit 1, not 2.
    dsn = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"
    result = cli.invoke(app, ["schedule", "trigger", "job", *args, "--dsn", dsn])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ql3: error: ")
    assert needle in lines[0]
