"""The errors ql3_cluster_postgres raises; every one is a `ql3_runtime_core.QL3Error`.

```
QL3Error (ql3_runtime_core)
├── DatabaseError                     a PostgreSQL operation failed; wraps the psycopg error
│   └── ZoneRulesUnavailableError     the database holds no rule data for the zone rules needed
├── SchemaMismatchError               the schema is older or newer than this build expects
├── MigrationTamperedError            an already-applied migration file was changed
├── PrivateServerError                the demo's private PostgreSQL could not be found or run
├── ScheduleNotFoundError (LookupError)   no schedule has that name
├── DuplicateScheduleError (ValueError)   the schedule name is taken
├── ScheduleStateError (ValueError)       the schedule's state forbids the change
├── UnknownRoleError (ValueError)         not one of the QL3 roles
├── InvalidConninfoError (ValueError)     a connection string libpq cannot parse
└── RepositoryUnavailableError (ql3_runtime_core)
    └── NoWritableServerError             a server answered but none accepts writes (yet)
```

psycopg's own classes never escape this package: wrap them with `raise DatabaseError(...) from exc`
(errors are typed and name the field or value). Helpers owning other modules add their classes
here, below these.
"""

from __future__ import annotations

from ql3_runtime_core import QL3Error, RepositoryUnavailableError

__all__ = [
    "DatabaseError",
    "DuplicateScheduleError",
    "InvalidConninfoError",
    "MigrationTamperedError",
    "NoWritableServerError",
    "PrivateServerError",
    "ScheduleNotFoundError",
    "ScheduleStateError",
    "SchemaMismatchError",
    "UnknownRoleError",
    "ZoneRulesUnavailableError",
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


class PrivateServerError(QL3Error):
    """Raised when a private PostgreSQL server cannot be found, started or controlled."""

    __module__ = "ql3_cluster_postgres"


class ScheduleNotFoundError(QL3Error, LookupError):
    """Raised by ScheduleAdmin when no schedule has the given name; the message names it."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"schedule {name!r}: no such schedule")


class DuplicateScheduleError(QL3Error, ValueError):
    """Raised when adding a schedule whose name is already taken (retired names stay taken)."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"schedule {name!r}: a schedule with this name already exists")


class ScheduleStateError(QL3Error, ValueError):
    """Raised when a schedule's state does not allow the requested change (e.g. resume retired)."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, name: str, state: str, action: str, detail: str = "") -> None:
        self.name = name
        self.state = state
        self.action = action
        message = f"schedule {name!r}: cannot {action} a schedule in state {state!r}"
        super().__init__(f"{message}: {detail}" if detail else message)


class UnknownRoleError(QL3Error, ValueError):
    """Raised when a role is not one of owner, admin, runtime, worker_ingress; names the value."""

    __module__ = "ql3_cluster_postgres"

    def __init__(self, role: str) -> None:
        self.role = role
        super().__init__(
            f"role: unknown QL3 role {role!r}; expected owner, admin, runtime or worker_ingress"
            " (or the group names ql3_owner, ...)"
        )


class InvalidConninfoError(QL3Error, ValueError):
    """Raised when a connection string is not libpq `key=value` pairs nor a URI; names the field.

    The message never quotes the value: a connection string may hold a password.
    """

    __module__ = "ql3_cluster_postgres"

    REASON = "not a valid libpq connection string or URI"

    def __init__(self, field: str) -> None:
        self.field = field
        self.reason = self.REASON
        super().__init__(f"{field}: {self.REASON}")


class NoWritableServerError(RepositoryUnavailableError):
    """Raised when a server answered but none accepts writes: a standby, a leader change.

    The host list answered "read-only", "in hot standby", "starting up" or "shutting down", or
    the node reached is in recovery. A new leader usually accepts writes within seconds, so the
    service retries soon (a short fixed delay) instead of backing off as for a silent cluster.
    """

    __module__ = "ql3_cluster_postgres"


class ZoneRulesUnavailableError(DatabaseError):
    """Raised when a computation needs zone rules whose data the database does not hold.

    The message is one line naming the version needed and this node's, and what to run.
    """

    __module__ = "ql3_cluster_postgres"

    def __init__(self, needed: str | None, node: str, action: str) -> None:
        self.needed = needed
        self.node = node
        if needed is None:
            detail = "the database records no zone rules version (run `ql3 migrate`)"
        else:
            detail = (
                f"the database records tzdata {needed} but holds no rule data for it (this node"
                f" has tzdata {node}); run `ql3 zone-rules adopt` from a node with tzdata"
                f" {needed} (stores its rules) or with the version to switch to"
            )
        super().__init__(f"{action}: zone rules: {detail}")
