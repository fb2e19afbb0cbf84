"""`ql3 zone-rules adopt`: switch the recorded zone rules and move what they placed, atomically.

One transaction, as `ql3_admin`:

1. lock the recorded version's row (`FOR UPDATE`): every commit holds it `FOR KEY SHARE` and every
   admin placement `FOR SHARE`, so each of them either finishes before the switch or waits for it
   and then sees the new version (a commit decided under the old one then fails its fence);
2. store the new version's rule data (the adopting node's tzdata, unless the database has it);
3. find the zones in use whose rule data differs between the two versions and lock their
   schedules (active or paused, with a cursor);
4. record the new version (its clock reading is the instant it takes effect) and its history row;
5. per locked schedule (`_moves`): one skip record of reason `zone_rules_changed` for the old
   rules' occurrences due up to that instant and not decided, a new cursor under the new rules,
   its live revision ended and a `zone_rules` revision opened;
6. fence every claim taken under the old rules (its commit races) and wake the replicas.

The COMMIT goes through `acknowledged_write`: a lost reply or a WARNING-only acknowledgement is
settled by reading the version history after the durability barrier (`settle_durably`). A dry run
computes the same moves in a read-only transaction, locks nothing and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import psycopg
from psycopg.rows import class_row, dict_row
from ql3_runtime_core import ScheduleState, ZoneRules, zone_rules_version

from ql3_cluster_postgres._connect import ConnectionOptions, connect, wrap_error
from ql3_cluster_postgres._definitions import DefinitionColumns, checked_definition
from ql3_cluster_postgres._durability import UncertainWriteError, acknowledged_write, settle_durably
from ql3_cluster_postgres._errors import DatabaseError, ZoneRulesUnavailableError
from ql3_cluster_postgres._rows import named_row
from ql3_cluster_postgres._send import send

from ._moves import ZoneMove, plan_zone_move
from ._rules import (
    APPLICATION_NAME,
    ZoneRulesChange,
    ZoneRulesRecord,
    ZoneRuleVersion,
    append_zone_rule_version,
    connection_zone_rules,
    node_zone_data,
    read_zone_bytes,
    stored_zone_count,
    upload_zone_data,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["adopt_zone_rules"]

_ACTION: Final = "zone rules: adopt"
_REVISION_REASON: Final = "zone_rules"
_RECORD = class_row(ZoneRulesRecord)
_HISTORY = class_row(ZoneRuleVersion)


class _Zone(NamedTuple):
    zone: str


class _Now(NamedTuple):
    now_ms: int


_ZONE = named_row(_Zone)
_NOW = named_row(_Now)


def adopt_zone_rules(
    conninfo: str,
    *,
    version: str | None = None,
    data: Mapping[str, bytes] | None = None,
    dry_run: bool = False,
    settle_timeout_s: float = 5.0,
) -> ZoneRulesChange:
    """Make `version` (default: this node's) the recorded zone rules, moving what changed.

    `data` is that version's rule data (zone name -> TZif bytes); by default this node's tzdata
    wheel gives it for its own version, and another version must be stored already. Adopting the
    recorded version changes nothing (it stores its data if the database lacks it). With
    `dry_run`, nothing is locked or written and the result says what would move. Needs role
    ql3_admin (or the owner).

    Raises:
        ZoneRulesUnavailableError: no rule data for `version` is given or stored.
        DatabaseError: the transaction failed, or the new rules lack a zone that schedules use
            (nothing changed).
        RepositoryUnavailableError: the COMMIT's fate could not be settled yet (an
            `UncertainWriteError` when the barrier failed): read `ql3 zone-rules show` later.

    """
    wanted = version or zone_rules_version()
    adoption = _Adoption(wanted, node_zone_data(wanted, data), dry_run=dry_run)
    options = ConnectionOptions(conninfo, application_name=APPLICATION_NAME)
    with connect(options, _ACTION) as conn:
        try:
            if dry_run:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                with conn.transaction(force_rollback=True):
                    return adoption.run(conn)
            with acknowledged_write(conn, _ACTION), conn.transaction():
                return adoption.run(conn)
        except UncertainWriteError:
            return _settle(options, adoption, settle_timeout_s)
        except psycopg.Error as exc:
            raise wrap_error(exc, _ACTION) from exc


def _settle(options: ConnectionOptions, adoption: _Adoption, timeout_s: float) -> ZoneRulesChange:
    """Tell from durable facts whether an adopt whose COMMIT was uncertain took effect."""
    change = adoption.result
    if change is None:  # pragma: no cover - the COMMIT follows the result
        raise DatabaseError(f"{_ACTION}: uncertain before any result; run it again")
    took_effect = (change.current.version, change.current.recorded_at_ms)
    with connect(options, f"{_ACTION}: settle") as fresh:
        try:
            history = settle_durably(
                fresh,
                timeout_s,
                lambda conn: send(conn, "read_zone_rule_history", rows=_HISTORY).fetchall(),
            )
        except psycopg.Error as exc:
            raise wrap_error(exc, f"{_ACTION}: settle") from exc
    if any((row.version, row.took_effect_at_ms) == took_effect for row in history):
        return change
    msg = f"{_ACTION}: the switch to tzdata {change.current.version} did not commit; run it again"
    raise DatabaseError(msg)


@dataclass
class _Adoption:
    """One adopt's steps on one connection; `result` is set once everything is written."""

    wanted: str
    offered: dict[str, bytes] | None
    dry_run: bool
    result: ZoneRulesChange | None = None
    _conn: psycopg.Connection[Any] | None = field(default=None, repr=False)

    def connection(self) -> psycopg.Connection[Any]:
        assert self._conn is not None  # noqa: S101  # set by run() before any read
        return self._conn

    def run(self, conn: psycopg.Connection[Any]) -> ZoneRulesChange:
        self._conn = conn
        lock = "read_zone_rules" if self.dry_run else "lock_zone_rules"
        previous = send(conn, lock, rows=_RECORD).fetchone()
        old = None if previous is None else previous.version
        if previous is not None and old == self.wanted:
            # Nothing to switch: fencing claims here would make replicas lose work for nothing.
            stored = self._store() if stored_zone_count(conn, old) == 0 else 0
            self.result = ZoneRulesChange(
                previous=old, current=previous, stored_zones=stored, dry_run=self.dry_run
            )
            return self.result
        new_rules, new_bytes, stored = self._new_rules()
        old_known = old is not None and stored_zone_count(conn, old) > 0
        changed = self._changed_zones(old if old_known else None, new_bytes)
        rows = self._schedules(changed)
        current = self._switch(previous)
        moves = self._moves(rows, old if old_known else None, new_rules, current.recorded_at_ms)
        fenced = 0 if self.dry_run else self._write(moves, old)
        self.result = ZoneRulesChange(
            previous=old,
            current=current,
            fenced_claims=fenced,
            stored_zones=stored,
            changed_zones=tuple(changed),
            moves=tuple(moves),
            old_rules_known=old_known,
            dry_run=self.dry_run,
        )
        return self.result

    def _store(self) -> int:
        if self.dry_run or self.offered is None:
            return 0
        return upload_zone_data(self.connection(), self.wanted, self.offered)

    def _new_rules(self) -> tuple[ZoneRules, Mapping[str, bytes] | None, int]:
        """Return the new rules, their bytes if given (else read when needed), the zones stored."""
        conn = self.connection()
        if self.offered is not None:
            return ZoneRules.from_data(self.wanted, self.offered), self.offered, self._store()
        if stored_zone_count(conn, self.wanted) == 0:
            raise ZoneRulesUnavailableError(self.wanted, zone_rules_version(), _ACTION)
        return connection_zone_rules(self.connection, self.wanted), None, 0

    def _changed_zones(self, old: str | None, new_bytes: Mapping[str, bytes] | None) -> list[str]:
        """Return the zones in use whose data differs (all of them when the old data is unknown)."""
        conn = self.connection()
        zones = [row.zone for row in send(conn, "zones_in_use", rows=_ZONE)]
        new = (
            dict(new_bytes) if new_bytes is not None else read_zone_bytes(conn, self.wanted, zones)
        )
        unknown = [zone for zone in zones if zone not in new]
        if unknown:
            msg = (
                f"{_ACTION}: tzdata {self.wanted} has no zone {', '.join(unknown)}, which"
                " schedules use; nothing changed"
            )
            raise DatabaseError(msg)
        if old is None:
            return zones
        before = read_zone_bytes(conn, old, zones)
        return [zone for zone in zones if before.get(zone) != new[zone]]

    def _schedules(self, zones: Sequence[str]) -> list[dict[str, Any]]:
        if not zones:
            return []
        name = "read_zone_schedules" if self.dry_run else "lock_zone_schedules"
        cursor = self.connection().cursor(row_factory=dict_row)
        return send(cursor, name, {"zones": list(zones)}).fetchall()

    def _switch(self, previous: ZoneRulesRecord | None) -> ZoneRulesRecord:
        """Record the new version (or, dry, read the instant it would take effect)."""
        conn = self.connection()
        if self.dry_run:
            row = send(conn, "placement_now_ms", rows=_NOW).fetchone()
            now = 0 if row is None else row.now_ms
            by = previous.recorded_by if previous is not None else "(dry run)"
            return ZoneRulesRecord(version=self.wanted, recorded_at_ms=now, recorded_by=by)
        params = {"version": self.wanted}
        adopted = send(conn, "adopt_zone_rules", params, rows=_RECORD)
        record = adopted.fetchone()
        if record is None:  # pragma: no cover - an upsert always returns its row
            raise DatabaseError(f"{_ACTION}: the upsert returned no row")
        append_zone_rule_version(conn)
        return record

    def _moves(
        self,
        rows: Sequence[dict[str, Any]],
        old: str | None,
        new_rules: ZoneRules,
        took_effect_at_ms: int,
    ) -> list[ZoneMove]:
        if not rows:
            return []
        old_rules = None if old is None else connection_zone_rules(self.connection, old)
        decided = self._latest_decided([int(row["id"]) for row in rows])
        moves = []
        for row in rows:
            try:
                definition = checked_definition(DefinitionColumns.of(row))
            except Exception:  # noqa: BLE001, S112  # unreadable: quarantined at its next claim
                continue
            moves.append(
                plan_zone_move(
                    int(row["id"]),
                    row["name"],
                    definition,
                    ScheduleState(row["state"]),
                    int(row["next_due_at_ms"]),
                    old_rules=old_rules,
                    new_rules=new_rules,
                    took_effect_at_ms=took_effect_at_ms,
                    decided_ms=decided.get(int(row["id"])),
                )
            )
        return moves

    def _latest_decided(self, ids: Sequence[int]) -> dict[int, int]:
        rows = send(self.connection(), "latest_decided", {"schedule_ids": list(ids)}, rows=dict_row)
        return {
            int(row["id"]): int(row["latest_ms"]) for row in rows if row["latest_ms"] is not None
        }

    def _write(self, moves: Sequence[ZoneMove], old: str | None) -> int:
        """Write the moves, their revisions and skip records; fence claims, wake replicas."""
        conn = self.connection()
        if moves:
            _write_moves(conn, moves)
            skipping = [move for move in moves if move.skipped_count]
            if skipping and old is not None:
                send(
                    conn,
                    "insert_zone_rule_skips",
                    {
                        "old_version": old,
                        "new_version": self.wanted,
                        "schedule_ids": [move.schedule_id for move in skipping],
                        "first_ms": [move.skipped_first_ms for move in skipping],
                        "last_ms": [move.skipped_last_ms for move in skipping],
                        "counts": [move.skipped_count for move in skipping],
                    },
                )
        # Only the count matters: one row per claim whose commit will now race.
        fenced = send(conn, "fence_claims_for_zone_rules").rowcount
        send(conn, "notify_schedule_changed", {"reason": "zone_rules"})
        return fenced


def _write_moves(conn: psycopg.Connection[Any], moves: Sequence[ZoneMove]) -> None:
    """Rewrite each moved row's cursor and state and replace its live revision."""
    ids = [move.schedule_id for move in moves]
    nothing: list[None] = [None] * len(moves)
    send(
        conn,
        "update_schedules",
        {
            "schedule_ids": ids,
            "crons": nothing,
            "timezones": nothing,
            "policies": nothing,
            "graces": nothing,
            "starts": nothing,
            "ends": nothing,
            "cursors": [move.cursor_after_ms for move in moves],
            "states": [move.state_after.value for move in moves],
            # The definition stays: only where its occurrences fall changed.
            "keeps": [True] * len(moves),
        },
    )
    send(
        conn,
        "close_revisions",
        {"schedule_ids": ids, "end_cursors": [move.old_end_cursor_ms for move in moves]},
    )
    send(
        conn,
        "open_revisions",
        {
            "schedule_ids": ids,
            "reasons": [_REVISION_REASON] * len(moves),
            "first_cursors": [move.cursor_after_ms for move in moves],
        },
    )
