"""The server room: `PrivateServer`, the one private PostgreSQL `ql3 demo` runs without a DSN.

Owns finding the PostgreSQL binaries, initialising and starting a server in a temporary folder,
and the OS process plumbing (an unprivileged user, spawn, stop) it needs.

May import: the package's base modules only. No other room imports it: the demo and the tests
start a server, the scheduling code only ever gets a connection string.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._binaries import find_postgres_bin_dir
from ._private_server import PrivateServer

__all__ = [
    "PrivateServer",
    "find_postgres_bin_dir",
]
