"""The errors ql3_cluster_postgres raises; every one is a `ql3_runtime_core.QL3Error`.

```
QL3Error (ql3_runtime_core)
├── DatabaseError                     a PostgreSQL operation failed; wraps the psycopg error
├── SchemaMismatchError               the schema is older or newer than this build expects
├── MigrationTamperedError            an already-applied migration file was changed
└── ThrowawayClusterError             a disposable test/demo cluster could not be set up
```

psycopg's own classes never escape this package: wrap them with `raise DatabaseError(...) from exc`
(STYLE §3). Helpers owning other modules add their classes here, below these.
"""

from __future__ import annotations

from ql3_runtime_core import QL3Error

__all__ = [
    "DatabaseError",
    "MigrationTamperedError",
    "SchemaMismatchError",
    "ThrowawayClusterError",
]


class DatabaseError(QL3Error):
    """Raised when a PostgreSQL statement or connection fails; `__cause__` is the driver error."""

    __module__ = "ql3_cluster_postgres"


class SchemaMismatchError(QL3Error):
    """Raised when the database schema version differs from the one this build was made for."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, found: int, expected: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(
            f"database schema version {found}, this build expects {expected}"
            + (" (run `ql3 migrate`)" if found < expected else " (upgrade this build)"),
        )


class MigrationTamperedError(QL3Error):
    """Raised when an applied migration file no longer matches the checksum in the ledger."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, name: str, recorded_sha256: str, current_sha256: str) -> None:
        self.name = name
        self.recorded_sha256 = recorded_sha256
        self.current_sha256 = current_sha256
        super().__init__(
            f"migration {name!r} was changed after it was applied: ledger sha256"
            f" {recorded_sha256}, file sha256 {current_sha256}; migrations are forward-only,"
            " add a new file instead",
        )


class ThrowawayClusterError(QL3Error):
    """Raised when a disposable PostgreSQL cluster cannot be found, started or controlled."""

    __module__ = "ql3_cluster_postgres"
