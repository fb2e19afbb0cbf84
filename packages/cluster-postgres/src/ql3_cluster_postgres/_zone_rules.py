"""The zone rules version every replica must decide with, recorded in the database (issue 10.3).

Zone rules come from the pinned `tzdata` package (`ql3_runtime_core.zone_rules_version()`). The
database records one version in `ql3.zone_rules`; a replica whose version differs claims nothing
(the claim statement compares the two), so two sets of zone rules never decide at once. The
record is written by `ql3 migrate` when none exists (`record_zone_rules`) and switched only by an
explicit operator step, `ql3 zone-rules adopt` (`adopt_zone_rules`). Times are database times.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import zone_rules_version

from ._connect import ConnectionOptions, connect, wrap_error
from ._errors import DatabaseError
from ._sql import query

__all__ = [
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "adopt_zone_rules",
    "read_zone_rules",
    "record_zone_rules",
]

_MODEL = ConfigDict(frozen=True, extra="forbid")
_APPLICATION_NAME: Final = "ql3-zone-rules"


class ZoneRulesRecord(BaseModel):
    """The recorded zone rules version, when (database time) and by which login it was recorded.

    Read by column name from `read_zone_rules`, `record_zone_rules`, `lock_zone_rules` and
    `adopt_zone_rules`, whose columns are these fields.
    """

    model_config = _MODEL

    version: str
    recorded_at_ms: int
    recorded_by: str


class ZoneRulesChange(BaseModel):
    """What `record_zone_rules` or `adopt_zone_rules` found and left.

    `previous` is the version recorded before (None: none was); `fenced_claims` counts claims
    taken under the previous rules whose commit will now fail its fence (raced).
    """

    model_config = _MODEL

    previous: str | None
    current: ZoneRulesRecord
    fenced_claims: int = 0

    @property
    def changed(self) -> bool:
        """True when this call wrote a new recorded version."""
        return self.previous != self.current.version


# Rarely run, and the rows become public models anyway: class_row into the model itself.
_RECORD = class_row(ZoneRulesRecord)


def _connect(conninfo: str, action: str) -> psycopg.Connection[Any]:
    """Open an autocommit connection through the package's factory (adopt opens a transaction)."""
    return connect(ConnectionOptions(conninfo, application_name=_APPLICATION_NAME), action)


def read_zone_rules(conninfo: str) -> ZoneRulesRecord | None:
    """Return the recorded zone rules version, or None when none is recorded.

    Raises:
        DatabaseError: the database could not be read (e.g. its schema predates version 3).

    """
    action = "zone rules: read"
    with _connect(conninfo, action) as conn:
        try:
            return conn.cursor(row_factory=_RECORD).execute(query("read_zone_rules")).fetchone()
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc


def record_zone_rules(conninfo: str, *, version: str | None = None) -> ZoneRulesChange:
    """Record `version` (default: this node's) unless a version is recorded already.

    `ql3 migrate` calls it after the migrations; an existing record is never replaced here.

    Raises:
        DatabaseError: the statement failed.

    """
    wanted = version or zone_rules_version()
    action = "zone rules: record"
    with _connect(conninfo, action) as conn:
        try:
            records = conn.cursor(row_factory=_RECORD)
            # INSERT ... ON CONFLICT DO NOTHING: no row back means a version was recorded already,
            # which is then read (and kept: switching it is `adopt`'s job).
            inserted = records.execute(query("record_zone_rules"), {"version": wanted}).fetchone()
            if inserted is not None:
                return ZoneRulesChange(previous=None, current=inserted)
            current = records.execute(query("read_zone_rules")).fetchone()
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc
    if current is None:  # pragma: no cover - the conflicting row was deleted in between
        raise DatabaseError(f"{action}: no record after a conflicting insert; run it again")
    return ZoneRulesChange(previous=current.version, current=current)


def adopt_zone_rules(conninfo: str, *, version: str | None = None) -> ZoneRulesChange:
    """Switch the recorded zone rules to `version` (default: this node's), in one transaction.

    Claims taken under the previous rules are fenced (their commit races), and idle replicas are
    woken, so from the commit on only replicas with the new rules decide. Adopting the version
    already recorded changes nothing. Needs role ql3_admin (or the owner).

    Raises:
        DatabaseError: the transaction failed (nothing changed).

    """
    wanted = version or zone_rules_version()
    action = "zone rules: adopt"
    with _connect(conninfo, action) as conn:
        try:
            with conn.transaction():
                return _adopt(conn, wanted)
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc


def _adopt(conn: psycopg.Connection[Any], wanted: str) -> ZoneRulesChange:
    records = conn.cursor(row_factory=_RECORD)
    previous = records.execute(query("lock_zone_rules")).fetchone()
    if previous is not None and previous.version == wanted:
        # Nothing to switch: fencing claims here would make replicas lose work for nothing.
        return ZoneRulesChange(previous=wanted, current=previous)
    adopted = records.execute(query("adopt_zone_rules"), {"version": wanted}).fetchone()
    if adopted is None:  # pragma: no cover - an upsert always returns its row
        raise DatabaseError("zone rules: adopt: the upsert returned no row")
    # Only the count matters: one row per claim whose commit will now race.
    fenced = conn.execute(query("fence_claims_for_zone_rules")).rowcount
    conn.execute(query("notify_schedule_changed"), {"reason": "zone_rules"})
    return ZoneRulesChange(
        previous=None if previous is None else previous.version,
        current=adopted,
        fenced_claims=fenced,
    )
