"""The server room: `PrivateServer`, the one private PostgreSQL `ql3 demo` runs without a DSN.

Owns finding the PostgreSQL binaries, initialising and starting a server in a temporary folder,
and the OS process plumbing (an unprivileged user, spawn, stop) it needs.

May import: the package's base modules only. No other room imports it: the demo and the tests
start a server, the scheduling code only ever gets a connection string.
"""
