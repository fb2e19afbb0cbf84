"""The database as the zone authority: the recorded version, its history and every version's data.

Zone rules are versioned (`tzdata` releases). The database records one version in
`ql3.zone_rules` (the one every decision uses), the history of the versions that were in force
with the instant each one took effect (`ql3.zone_rule_versions`), and the rule data, every zone's
TZif bytes, of each version it records (`ql3.zone_rule_data`). Replicas, admins and `ql3 verify`
compute with rules loaded from there (`connection_zone_rules`, `load_recorded_zone_rules`), never
with their node's tzdata: a node's version matters only when it uploads its data.

`record_zone_rules` (`ql3 migrate`) records the node's version when none is recorded and uploads
the node's data for a version the database knows without its data; switching the recorded version
is `adopt_zone_rules` (`_adopt`). Times are database times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import ZoneRules, wheel_zone_data, zone_rules_version

from ql3_cluster_postgres._connect import ConnectionOptions, connect, wrap_error
from ql3_cluster_postgres._errors import DatabaseError, ZoneRulesUnavailableError
from ql3_cluster_postgres._rows import named_row
from ql3_cluster_postgres._send import send

from ._moves import ZoneMove

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

__all__ = [
    "ZoneRuleVersion",
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "append_zone_rule_version",
    "connection_zone_rules",
    "load_recorded_zone_rules",
    "node_zone_data",
    "read_zone_bytes",
    "read_zone_rule_history",
    "read_zone_rules",
    "record_zone_rules",
    "stored_zone_count",
    "upload_zone_data",
]

_MODEL = ConfigDict(frozen=True, extra="forbid")
APPLICATION_NAME: Final = "ql3-zone-rules"


class ZoneRulesRecord(BaseModel):
    """The recorded zone rules version, when (database time) and by which login it was recorded.

    Read by column name from `read_zone_rules`, `record_zone_rules`, `lock_zone_rules` and
    `adopt_zone_rules`, whose columns are these fields.
    """

    model_config = _MODEL

    version: str
    recorded_at_ms: int
    recorded_by: str


class ZoneRuleVersion(BaseModel):
    """One version in the history: when it took effect and was superseded (None: in force).

    `zones` counts the zones whose rule data the database stores for it (0: not known).
    """

    model_config = _MODEL

    seq: int
    version: str
    took_effect_at_ms: int
    superseded_at_ms: int | None
    recorded_by: str
    zones: int


class ZoneRulesChange(BaseModel):
    """What `record_zone_rules` or `adopt_zone_rules` found, did (or, dry, would do) and left.

    `previous` is the version recorded before (None: none was); `fenced_claims` counts claims
    taken under the previous rules whose commit will now fail its fence (raced). `stored_zones`
    counts the zones whose data this call stored. `changed_zones` are the zones in use whose rule
    data differs between the two versions, and `moves` what happened to each schedule in them;
    `old_rules_known` is False when the previous version's data was not stored (then every zone
    counts as changed and nothing could be counted under the old rules).
    """

    model_config = _MODEL

    previous: str | None
    current: ZoneRulesRecord
    fenced_claims: int = 0
    stored_zones: int = 0
    changed_zones: tuple[str, ...] = ()
    moves: tuple[ZoneMove, ...] = ()
    old_rules_known: bool = True
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        """True when this call wrote (or, dry, would write) a new recorded version."""
        return self.previous != self.current.version


class _Upload(NamedTuple):
    stored: int
    differing: int


class _Zones(NamedTuple):
    zones: int


class _ZoneBytes(NamedTuple):
    zone: str
    tzif: bytes


# Rarely run, and the rows become public models anyway: class_row into the model itself.
_RECORD = class_row(ZoneRulesRecord)
_HISTORY = class_row(ZoneRuleVersion)
_UPLOAD = named_row(_Upload)
_ZONES = named_row(_Zones)
_ZONE_BYTES = named_row(_ZoneBytes)


def open_zone_connection(conninfo: str, action: str) -> psycopg.Connection[Any]:
    """Open an autocommit connection through the package's factory (callers open transactions)."""
    return connect(ConnectionOptions(conninfo, application_name=APPLICATION_NAME), action)


def node_zone_data(
    version: str | None, data: Mapping[str, bytes] | None
) -> dict[str, bytes] | None:
    """Return the rule data a node can give for `version`: `data`, or its wheel's for its own."""
    if data is not None:
        return dict(data)
    if version is None or version == zone_rules_version():
        return wheel_zone_data()
    return None


def read_zone_rules(conninfo: str) -> ZoneRulesRecord | None:
    """Return the recorded zone rules version, or None when none is recorded.

    Raises:
        DatabaseError: the database could not be read (e.g. its schema predates version 3).

    """
    action = "zone rules: read"
    with open_zone_connection(conninfo, action) as conn:
        try:
            return send(conn, "read_zone_rules", rows=_RECORD).fetchone()
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc


def read_zone_rule_history(conninfo: str) -> list[ZoneRuleVersion]:
    """Return every version that was recorded, in the order they took effect (database times)."""
    action = "zone rules: read history"
    with open_zone_connection(conninfo, action) as conn:
        try:
            return send(conn, "read_zone_rule_history", rows=_HISTORY).fetchall()
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc


def record_zone_rules(
    conninfo: str, *, version: str | None = None, data: Mapping[str, bytes] | None = None
) -> ZoneRulesChange:
    """Record `version` (default: this node's) unless one is recorded, and store known rule data.

    `ql3 migrate` calls it after the migrations; an existing record is never replaced here. The
    rule data of `version` (`data`, or this node's wheel for its own version) is stored when the
    database has that version in its history but not its data: a database upgraded from a schema
    without rule data gets the data of its recorded version from a node that has it.

    Raises:
        DatabaseError: a statement failed (nothing changed).

    """
    wanted = version or zone_rules_version()
    offered = node_zone_data(wanted, data)
    action = "zone rules: record"
    with open_zone_connection(conninfo, action) as conn:
        try:
            with conn.transaction():
                return _record(conn, wanted, offered)
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc


def _record(
    conn: psycopg.Connection[Any], wanted: str, offered: dict[str, bytes] | None
) -> ZoneRulesChange:
    records = conn.cursor(row_factory=_RECORD)
    # INSERT ... ON CONFLICT DO NOTHING: no row back means a version was recorded already, which
    # is then read (and kept: switching it is `adopt`'s job).
    inserted = send(records, "record_zone_rules", {"version": wanted}).fetchone()
    if inserted is not None:
        append_zone_rule_version(conn)
    current = inserted or send(records, "read_zone_rules").fetchone()
    if current is None:  # pragma: no cover - the conflicting row was deleted in between
        raise DatabaseError("zone rules: record: no record after a conflicting insert; run again")
    stored = 0
    known = {row.version for row in send(conn, "read_zone_rule_history", rows=_HISTORY)}
    if offered is not None and wanted in known and stored_zone_count(conn, wanted) == 0:
        stored = upload_zone_data(conn, wanted, offered)
        # A replica waiting for the recorded rules' data loads it at once.
        send(conn, "notify_schedule_changed", {"reason": "zone_rules"})
    previous = None if inserted is not None else current.version
    return ZoneRulesChange(previous=previous, current=current, stored_zones=stored)


def append_zone_rule_version(conn: psycopg.Connection[Any]) -> None:
    """After ql3.zone_rules was written in this transaction: close the old span, open the new."""
    send(conn, "supersede_zone_rule_version")
    send(conn, "append_zone_rule_version")


def stored_zone_count(conn: psycopg.Connection[Any], version: str) -> int:
    """Return how many zones the database stores for `version` (0: its rules are not known)."""
    row = send(conn, "count_zone_rule_data", {"version": version}, rows=_ZONES).fetchone()
    return 0 if row is None else row.zones


def upload_zone_data(conn: psycopg.Connection[Any], version: str, data: Mapping[str, bytes]) -> int:
    """Store `version`'s rule data (zones already stored stay); return how many were stored.

    Raises:
        DatabaseError: the database stores other bytes for one of these zones under this version
            (a version name must mean one set of rules).

    """
    zones = sorted(data)
    params = {"version": version, "zones": zones, "tzifs": [data[zone] for zone in zones]}
    row = send(conn, "upload_zone_rule_data", params, rows=_UPLOAD).fetchone()
    if row is None:  # pragma: no cover - the statement always returns one row
        raise DatabaseError("zone rules: upload: the statement returned no row")
    if row.differing:
        msg = (
            f"zone rules: the database stores other rule data for {row.differing} zone(s) of"
            f" tzdata {version} than this node has; refusing to mix them"
        )
        raise DatabaseError(msg)
    return row.stored


def read_zone_bytes(
    conn: psycopg.Connection[Any], version: str, zones: Iterable[str]
) -> dict[str, bytes]:
    """Return the stored TZif bytes of `zones` in `version` (a zone it lacks is absent)."""
    params = {"version": version, "zones": sorted(set(zones))}
    rows = send(conn, "read_zone_rule_data", params, rows=_ZONE_BYTES)
    return {row.zone: bytes(row.tzif) for row in rows}


def connection_zone_rules(
    connection: Callable[[], psycopg.Connection[Any]], version: str
) -> ZoneRules:
    """Return `version`'s stored rules, each zone read on first use through `connection()`.

    For callers computing inside their own transaction (the admin, verify): the zone is read in
    it. A driver error while reading propagates to that caller, which wraps it.
    """

    def read_zone(name: str) -> bytes | None:
        return read_zone_bytes(connection(), version, [name]).get(name)

    return ZoneRules(version, read_zone)


def load_recorded_zone_rules(conninfo: str, zones: Iterable[str]) -> ZoneRules:
    """Return the recorded rules holding `zones` (read now; other zones are unknown to them).

    Raises:
        ZoneRulesUnavailableError: no version is recorded, or its rule data is not stored.

    """
    action = "zone rules: load"
    with open_zone_connection(conninfo, action) as conn:
        try:
            record = send(conn, "read_zone_rules", rows=_RECORD).fetchone()
            version = None if record is None else record.version
            if version is None or stored_zone_count(conn, version) == 0:
                raise ZoneRulesUnavailableError(version, zone_rules_version(), action)
            return ZoneRules.from_data(version, read_zone_bytes(conn, version, zones))
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc
