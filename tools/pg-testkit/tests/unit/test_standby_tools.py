"""A standby needs pg_basebackup, which the product's server lookup no longer asks for.

The product requires only what its embedded server runs (initdb, postgres, pg_ctl); the kit
checks the standby's tool itself so that a folder without it fails with what to install, not
with a bare "cannot run".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ql3_cluster_postgres import PrivateServer
from ql3_testkit import ThrowawayClusterError
from ql3_testkit._standby import base_backup

if TYPE_CHECKING:
    from pathlib import Path


def test_a_standby_without_pg_basebackup_says_what_to_install(tmp_path: Path) -> None:
    """A bin folder with the server but no pg_basebackup is refused before anything runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("initdb", "postgres", "pg_ctl"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    primary = PrivateServer(name="primary", bin_dir=bin_dir, base_dir=tmp_path)
    standby = PrivateServer(name="standby", bin_dir=bin_dir, base_dir=tmp_path)
    with pytest.raises(ThrowawayClusterError, match=r"no pg_basebackup.*postgresql-client"):
        base_backup(primary, standby, no_sync=True)
    assert not list(tmp_path.glob("*/data"))
