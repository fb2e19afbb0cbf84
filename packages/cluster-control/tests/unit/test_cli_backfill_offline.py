"""`ql3 schedule backfill` with no database: a bad argument is refused before connecting."""

from __future__ import annotations

import pytest
from ql3_cluster_control import cli_app as app
from typer.testing import CliRunner  # noqa: TC002  # pytest resolves fixture annotations

GOOD = "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--from", "yesterday", "--to", GOOD], "--from"),
        (["--from", GOOD, "--to", "2026-01-01T00:00:00"], "--to"),
        (["--from", GOOD, "--to", "2025-12-31T23:59:59Z"], "--from"),
        (["--from", GOOD, "--to", GOOD, "--request-id", "has space"], "request_id"),
        (["--from", GOOD, "--to", GOOD, "--batch", "0"], "--batch"),
        (["--from", GOOD, "--to", GOOD, "--batch", "10001"], "--batch"),
    ],
)
def test_backfill_argument_errors_exit_2_before_connecting(
    cli: CliRunner, args: list[str], needle: str
) -> None:
    """Malformed or reversed times, a bad request id or batch: one line naming it, exit 2."""
    # Port 1 on loopback: nothing listens, so connecting would fail with exit 1, not 2.
    dsn = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"
    result = cli.invoke(app, ["schedule", "backfill", "job", *args, "--dsn", dsn])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("ql3: error: ")
    assert needle in lines[-1]
