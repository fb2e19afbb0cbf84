"""ScheduleAdmin: tasks, triggers and schedule definitions, used as role `ql3_admin` (DESIGN §11).

Admin never touches the claim columns: a change to a claimed schedule bumps its version, so the
holder's commit fails its exact-claim fence (raced) and the next claim sees the new definition.
Cursors are computed by runtime-core's cron engine from the database's `now`, read in the same
transaction (rule zero) AFTER the changed rows are locked, together with each schedule's latest
decided occurrence: a replica's commit can no longer land between the clock read and the lock
and leave the new cursor at or before an admitted run (DESIGN §7). Every creation, every cursor
placed anew and every definition change opens a schedule revision in the same transaction, so
`ql3 verify` can account for each definition's occurrences. Every change notifies
`ql3_schedule_changed` inside its transaction. What a schedule's runs execute (command,
attempts, timeout, backoff; DESIGN §10) lives on its task and is written in the same transaction.
Occurrences are computed with the zone rules the database records, held FOR SHARE from the start
of each placing transaction (before any schedule row is locked, the order an adopt takes them
too), so an adopt either waits for the placement or the placement waits for it and then uses the
new rules; when the database holds no rule data for the recorded version the change is refused.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from ql3_runtime_core import (
    LEASE_MS_DEFAULT,
    ScheduleDefinition,
    ScheduleState,
    TaskExecution,
    ZoneRules,
    log_event,
    payload_text,
    zone_rules_version,
)

from ql3_cluster_postgres._bounds import check_lease
from ql3_cluster_postgres._connect import (
    ConnectionOptions,
    close_quietly,
    connect,
    reuse_or_connect,
    wrap_error,
)
from ql3_cluster_postgres._durability import UncertainWriteError, acknowledged_write, settle_durably
from ql3_cluster_postgres._errors import (
    DatabaseError,
    DuplicateScheduleError,
    ScheduleNotFoundError,
    ScheduleStateError,
    ZoneRulesUnavailableError,
)
from ql3_cluster_postgres._lifecycle import Closing
from ql3_cluster_postgres._replication import read_replication_state
from ql3_cluster_postgres._retry import TRANSACTION_RETRY
from ql3_cluster_postgres._sql import query
from ql3_cluster_postgres.zones._rules import connection_zone_rules, stored_zone_count

from ._models import (
    ApplyReport,
    ScheduleRecord,
    ScheduleSpec,
    ScheduleStatus,
    StatusReport,
)
from ._plan import (
    Update,
    initial_cursor,
    readable_definition,
    reconcile,
    resumed,
    validated,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = ["ScheduleAdmin"]

logger = logging.getLogger(__name__)

# Rows are read by name (dict_row): the SQL's column names are the contract, not their order.
_Row = dict[str, Any]
T = TypeVar("T")


# Revision reasons written for new schedules (see migrations/0004).
_CREATED = "created"


def _database_now(conn: psycopg.Connection[Any], name: str = "database_now_ms") -> int:
    row = conn.cursor(row_factory=dict_row).execute(query(name)).fetchone()
    if row is None:  # pragma: no cover - the statement always returns one row
        msg = "admin: the database clock statement returned no row"
        raise DatabaseError(msg)
    return int(row["now_ms"])


def _nothing(_conn: psycopg.Connection[Any]) -> None:
    """Find no witness: settling a change without one means running it again."""
    return


def _placement_now(conn: psycopg.Connection[Any]) -> int:
    """Read the time new cursors are placed after; call it only once the rows are locked."""
    return _database_now(conn, "placement_now_ms")


class ScheduleAdmin(Closing):
    """Create, reconcile, pause, resume, retire and inspect schedules (role `ql3_admin`).

    Args:
        conninfo: libpq connection string.
        application_name: shown in `pg_stat_activity`.
        step_hook: called with `"locked"` inside a changing transaction, once the rows are locked
            and before the database time is read; a seam for interleaving tests, None otherwise.
        durability_timeout_ms: how long the durability barrier that settles an uncertain change
            (a lost COMMIT reply, or one acknowledged only with the sync-rep WARNING) may wait
            for the synchronous standby before the change is reported uncertain.

    """

    def __init__(
        self,
        conninfo: str,
        *,
        application_name: str = "ql3-admin",
        step_hook: Callable[[str], None] | None = None,
        durability_timeout_ms: int = 2_000,
    ) -> None:
        if durability_timeout_ms <= 0:
            msg = f"durability_timeout_ms: must be > 0, got {durability_timeout_ms}"
            raise ValueError(msg)
        self._options = ConnectionOptions(conninfo, application_name=application_name)
        self._durability_timeout_s = durability_timeout_ms / 1000
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self._step_hook = step_hook
        # The stored rules of each recorded version seen, zones read on first use (a version's
        # data never changes once stored).
        self._rules: dict[str, ZoneRules] = {}

    def _step(self, name: str) -> None:
        if self._step_hook is not None:
            self._step_hook(name)

    def close(self) -> None:
        """Close the connection (reopened on next use)."""
        with self._lock:
            close_quietly(self._conn)
            self._conn = None

    def _in_transaction(
        self,
        action: str,
        body: Callable[[psycopg.Connection[Any]], T],
        *,
        landed: Callable[[psycopg.Connection[Any]], T | None] | None = None,
    ) -> T:
        """Run `body` in one admin transaction; psycopg errors become QL3 errors naming `action`.

        A deadlock or serialization failure (an admin change meeting a runtime commit on the
        same rows) runs the whole transaction again, a few times, before giving up: the
        package's one retry policy (`TRANSACTION_RETRY`). A COMMIT whose reply was lost or that
        was acknowledged only with the sync-rep WARNING is settled from durable facts before
        anything is returned (`_settle`); `landed` reads whether such a change is there.
        """

        def attempt(_retries: int) -> T:
            with self._lock:
                conn = self._conn = reuse_or_connect(
                    self._conn, self._options, f"{action}: connect"
                )
                try:
                    with acknowledged_write(conn, action), conn.transaction():
                        return body(conn)
                except psycopg.Error:
                    if conn.broken:
                        close_quietly(conn)
                        self._conn = None
                    raise

        try:
            return TRANSACTION_RETRY.call(attempt)
        except UncertainWriteError as uncertain:
            return self._settle(action, uncertain, body, landed)
        except psycopg.Error as exc:
            raise wrap_error(exc, action) from exc

    def _settle(
        self,
        action: str,
        uncertain: UncertainWriteError,
        body: Callable[[psycopg.Connection[Any]], T],
        landed: Callable[[psycopg.Connection[Any]], T | None] | None,
    ) -> T:
        """Settle an admin change whose COMMIT is uncertain, on a fresh connection.

        The durability barrier passes first, so what is read afterwards is what a failover
        keeps. If `landed` finds the change, that is the result. Otherwise the change is run
        again: every admin change reconciles the durable rows towards what was asked (an add
        whose schedule is missing creates it, a pause of a paused schedule writes nothing, an
        apply compares again), so running it a second time never applies anything twice. A
        change still uncertain after that raises `UncertainWriteError`.
        """
        with self._lock:
            close_quietly(self._conn)
            self._conn = None
            # Settled from durable facts below, before anything is returned.
            log_event(logger, logging.WARNING, f"admin.{uncertain.kind}", action=action)
            conn = connect(self._options, f"{action}: settle")
            try:
                found = settle_durably(conn, self._durability_timeout_s, landed or _nothing)
                if found is not None:
                    return found
                with acknowledged_write(conn, action), conn.transaction():
                    return body(conn)
            except psycopg.Error as exc:
                raise wrap_error(exc, f"{action}: settle") from exc
            finally:
                close_quietly(conn)

    @staticmethod
    def _rows(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> list[_Row]:
        return conn.cursor(row_factory=dict_row).execute(query(name), params).fetchall()

    @classmethod
    def _records(
        cls, conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]
    ) -> list[ScheduleRecord]:
        """Run a statement that returns schedule rows (lock, read, create) and read them."""
        return [_record(row) for row in cls._rows(conn, name, params)]

    def database_now_ms(self) -> int:
        """Return the database clock in epoch milliseconds."""
        return self._in_transaction("admin: read database clock", _database_now)

    def _zone_rules(self, conn: psycopg.Connection[Any], action: str) -> ZoneRules:
        """Hold the recorded zone rules version FOR SHARE and return its stored rules.

        Raises:
            ZoneRulesUnavailableError: no version is recorded, or its rule data is not stored.

        """
        rows = self._rows(conn, "share_zone_rules", {})
        version = rows[0]["version"] if rows else None
        if version is None:
            raise ZoneRulesUnavailableError(None, zone_rules_version(), action)
        rules = self._rules.get(version)
        if rules is None:
            if stored_zone_count(conn, version) == 0:
                raise ZoneRulesUnavailableError(version, zone_rules_version(), action)
            rules = self._rules[version] = connection_zone_rules(self._current_conn, version)
        return rules

    def _current_conn(self) -> psycopg.Connection[Any]:
        # Zones are read inside the transaction that computes with them (the lock is held).
        if self._conn is None:  # pragma: no cover - only called inside a transaction
            msg = "admin: zone rules read outside a transaction"
            raise DatabaseError(msg)
        return self._conn

    # -- create and reconcile -------------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        definition: ScheduleDefinition,
        *,
        payload_template: Mapping[str, Any] | None = None,
        execution: TaskExecution | None = None,
    ) -> ScheduleRecord:
        """Create task, cron trigger and schedule in one transaction.

        The first cursor is the first occurrence strictly after max(database now,
        start_at_ms - 1). `execution` says what its runs execute (default: a Python task run by
        name, see `TaskExecution`). Raises `DuplicateScheduleError` when the name is taken and
        `InvalidArgumentError` when the payload is over `PAYLOAD_MAX_BYTES` (nothing written).
        """
        spec = validated(
            ScheduleSpec(name=name, definition=definition, execution=execution or TaskExecution())
        )
        payload = dict(payload_template or {})
        # Refused here, before anything is written: a payload a command cannot receive would
        # fail every attempt of every run with E2BIG.
        payload_text(payload, field="payload_template")

        action = f"admin: add schedule {name!r}"

        def add(conn: psycopg.Connection[Any]) -> ScheduleRecord:
            rules = self._zone_rules(conn, action)
            # A new row has no lock to wait for and no decided occurrence.
            created = self._create(conn, [spec], _placement_now(conn), [payload], rules)
            if not created:
                raise DuplicateScheduleError(name)
            self._set_executions(conn, [(created[0].task_id, spec.execution)])
            self._rows(conn, "notify_schedule_changed", {"reason": "created"})
            return created[0]

        def added(conn: psycopg.Connection[Any]) -> ScheduleRecord | None:
            # The witness of an uncertain add: a schedule of that name with this definition.
            found = self._records(conn, "read_schedules", {"names": [name]})
            if found and found[0].definition == spec.definition:
                return found[0]
            return None

        return self._in_transaction(action, add, landed=added)

    def apply_schedules(self, specs: Sequence[ScheduleSpec], *, prune: bool = False) -> ApplyReport:
        """Reconcile the stored schedules with `specs` in ONE transaction.

        Missing names are created, changed definitions updated (cursor recomputed when cron,
        timezone or start changed; retired ones come back), equal ones left alone; with `prune`,
        stored schedules not named in `specs` are retired.
        """
        names = [spec.name for spec in specs]
        duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
        if duplicates:
            msg = f"specs: schedule names appear more than once: {duplicates}"
            raise ValueError(msg)
        checked = [validated(spec) for spec in specs]
        # Pruning retires what the specs do not name, so it must lock and see every schedule;
        # otherwise only the named rows are locked and other admins' schedules stay untouched.
        lock_names = None if prune else names

        def apply(conn: psycopg.Connection[Any]) -> ApplyReport:
            rules = self._zone_rules(conn, "admin: apply schedules")
            stored = {
                record.name: record
                for record in self._records(conn, "lock_schedules", {"names": lock_names})
            }
            # Lock first, then read the clock and what was decided (DESIGN §7): a commit can
            # land before the lock, never between the reads and the writes.
            self._step("locked")
            now = _placement_now(conn)
            decided = self._latest_decided(conn, [r.schedule_id for r in stored.values()])
            executions = self._executions(conn, [r.task_id for r in stored.values()])
            plan = reconcile(
                checked,
                stored,
                now,
                decided,
                prune=prune,
                stored_executions=executions,
                rules=rules,
            )
            # Specs applied from a file carry no payload template (only add_schedule takes one).
            created = self._create(conn, plan.creates, now, [{} for _ in plan.creates], rules)
            if len(created) != len(plan.creates):  # a concurrent admin created one of them
                taken = {spec.name for spec in plan.creates} - {r.name for r in created}
                raise DuplicateScheduleError(min(taken))
            self._update(
                conn, plan.updates, {r.schedule_id: r.next_due_at_ms for r in stored.values()}
            )
            task_ids = {r.name: r.task_id for r in stored.values()}
            task_ids.update((record.name, record.task_id) for record in created)
            self._set_executions(
                conn, [(task_ids[name], execution) for name, execution in plan.executions]
            )
            if plan.creates or plan.updates or plan.executions:
                self._rows(conn, "notify_schedule_changed", {"reason": "applied"})
            return plan.report

        return self._in_transaction("admin: apply schedules", apply)

    def _create(
        self,
        conn: psycopg.Connection[Any],
        specs: Sequence[ScheduleSpec],
        now: int,
        payloads: Sequence[dict[str, Any]],
        rules: ZoneRules,
    ) -> list[ScheduleRecord]:
        if not specs:
            return []
        # Cached per definition and rules: a bulk apply asks the same question many times.
        cursors = [initial_cursor(spec.definition, now, rules=rules) for spec in specs]
        definitions = [spec.definition for spec in specs]
        params = {
            "names": [spec.name for spec in specs],
            "payloads": [Jsonb(payload) for payload in payloads],
            **_definition_columns(definitions),
            "cursors": [cursor for cursor, _ in cursors],
            "states": [state.value for _, state in cursors],
        }
        created = self._records(conn, "create_schedules", params)
        self._open_revisions(
            conn, [(record.schedule_id, _CREATED, record.next_due_at_ms) for record in created]
        )
        return created

    @staticmethod
    def _executions(
        conn: psycopg.Connection[Any], task_ids: Sequence[int] | None
    ) -> dict[str, TaskExecution]:
        """Read what the given tasks (all when None) execute, by task (= schedule) name."""
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                query("read_task_executions"),
                {"task_ids": None if task_ids is None else list(task_ids)},
            ).fetchall()
        # Keyed by name: a schedule and its task are created together under one name.
        return {
            row["name"]: TaskExecution(
                command=row["command"],
                max_attempts=row["max_attempts"],
                timeout_ms=row["timeout_ms"],
                retry_backoff_ms=row["retry_backoff_ms"],
            )
            for row in rows
        }

    def _set_executions(
        self, conn: psycopg.Connection[Any], executions: Sequence[tuple[int, TaskExecution]]
    ) -> None:
        """Write each (task id, execution) onto its task."""
        if not executions:
            return
        params = {
            "task_ids": [task_id for task_id, _ in executions],
            "commands": [execution.command for _, execution in executions],
            "max_attempts": [execution.max_attempts for _, execution in executions],
            "timeouts_ms": [execution.timeout_ms for _, execution in executions],
            "retry_backoffs_ms": [execution.retry_backoff_ms for _, execution in executions],
        }
        self._rows_count(conn, "set_task_executions", params)

    def _latest_decided(self, conn: psycopg.Connection[Any], ids: Sequence[int]) -> dict[int, int]:
        """Return each schedule's latest admitted or skipped occurrence (rows already locked)."""
        if not ids:
            return {}
        rows = self._rows(conn, "latest_decided", {"schedule_ids": list(ids)})
        return {
            int(row["id"]): int(row["latest_ms"]) for row in rows if row["latest_ms"] is not None
        }

    def _open_revisions(
        self, conn: psycopg.Connection[Any], revisions: Sequence[tuple[int, str, int | None]]
    ) -> None:
        """Open one revision per (schedule id, reason, first cursor), after the row was written."""
        if not revisions:
            return
        params = {
            "schedule_ids": [sid for sid, _, _ in revisions],
            "reasons": [reason for _, reason, _ in revisions],
            "first_cursors": [first for _, _, first in revisions],
        }
        self._rows_count(conn, "open_revisions", params)

    @staticmethod
    def _rows_count(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> int:
        return conn.execute(query(name), params).rowcount

    def _update(
        self,
        conn: psycopg.Connection[Any],
        updates: Sequence[Update],
        old_cursors: Mapping[int, int | None] | None = None,
    ) -> None:
        """Rewrite rows; close and open a revision for each update that opens one.

        `old_cursors` holds each revising schedule's cursor before the change (where its live
        revision ends).
        """
        if not updates:
            return
        params = {
            "schedule_ids": [update.schedule_id for update in updates],
            **_definition_columns([update.definition for update in updates]),
            "cursors": [update.next_due_at_ms for update in updates],
            "states": [update.state.value for update in updates],
            # A state change sends no definition: the statement keeps the stored one, which this
            # node may not even be able to read (a quarantined row).
            "keeps": [update.definition is None for update in updates],
        }
        self._rows(conn, "update_schedules", params)
        revising = [update for update in updates if update.revision is not None]
        if not revising:
            return
        # The live revision ends where the cursor stood before this change, not after it.
        ends = old_cursors or {}
        self._rows_count(
            conn,
            "close_revisions",
            {
                "schedule_ids": [update.schedule_id for update in revising],
                "end_cursors": [ends.get(update.schedule_id) for update in revising],
            },
        )
        self._open_revisions(
            conn,
            [
                (update.schedule_id, str(update.revision), update.first_cursor_ms)
                for update in revising
            ],
        )

    # -- state changes --------------------------------------------------------------------------

    def pause(self, name: str) -> ScheduleRecord:
        """Stop claiming `name` (its cursor is kept); pausing a paused schedule changes nothing."""
        return self._set_state(name, "pause", ScheduleState.PAUSED, {ScheduleState.ACTIVE})

    def resume(self, name: str) -> ScheduleRecord:
        """Make a paused or quarantined schedule claimable again from its kept cursor.

        The misfire policy decides what the time spent paused admits. A quarantined schedule
        (state `invalid`) comes back only if its stored definition reads now (say, after
        `ql3 zone-rules adopt` brought rules that know its zone); otherwise apply a corrected
        definition with `apply_schedules`. Bringing it back opens a schedule revision; a cursor
        that is missing, not after the latest run or skip record, or not an occurrence of the
        stored definition is placed anew after them (see `_admin_plan.resumed`).
        """
        allowed = {ScheduleState.PAUSED, ScheduleState.INVALID}
        return self._set_state(name, "resume", ScheduleState.ACTIVE, allowed)

    def retire(self, name: str) -> ScheduleRecord:
        """Retire `name` for good: never claimed again, its history kept."""
        allowed = {
            ScheduleState.ACTIVE,
            ScheduleState.PAUSED,
            ScheduleState.EXHAUSTED,
            ScheduleState.INVALID,
        }
        return self._set_state(name, "retire", ScheduleState.RETIRED, allowed)

    def _set_state(
        self, name: str, action: str, target: ScheduleState, allowed: set[ScheduleState]
    ) -> ScheduleRecord:
        def change(conn: psycopg.Connection[Any]) -> ScheduleRecord:
            # Resuming may place a cursor: the rules are held before the row (an adopt's order).
            rules = None
            if target is ScheduleState.ACTIVE:
                rules = self._zone_rules(conn, f"admin: {action} schedule {name!r}")
            locked = self._records(conn, "lock_schedules", {"names": [name]})
            if not locked:
                raise ScheduleNotFoundError(name)
            record = locked[0]
            if record.state is target:
                # Idempotent: nothing written, no version bump, so a held claim is not raced.
                return record
            if record.state not in allowed:
                raise ScheduleStateError(name, record.state.value, action)
            if rules is not None:
                if record.definition is None:
                    detail = (
                        f"its stored definition still cannot be read ({record.definition_error});"
                        " apply a corrected one (ql3 schedule apply)"
                    )
                    raise ScheduleStateError(name, record.state.value, action, detail)
                # The row is locked: now read the clock and what was decided (DESIGN §7).
                self._step("locked")
                now = _placement_now(conn)
                decided = self._latest_decided(conn, [record.schedule_id])
                decided_ms = decided.get(record.schedule_id)
                update = resumed(record, record.definition, now, decided_ms, rules)
            else:
                # Pause and retire keep the definition (None) and the cursor as they are.
                update = Update(record.schedule_id, None, record.next_due_at_ms, target)
            self._update(conn, [update], {record.schedule_id: record.next_due_at_ms})
            self._rows(conn, "notify_schedule_changed", {"reason": action})
            # Read back: the version and times are what the statement wrote, by database time.
            (changed,) = self._records(conn, "read_schedules", {"names": [name]})
            return changed

        return self._in_transaction(f"admin: {action} schedule {name!r}", change)

    # -- reading --------------------------------------------------------------------------------

    def list_schedules(self) -> list[ScheduleRecord]:
        """Return every schedule (all states), ordered by name."""
        return self._in_transaction(
            "admin: list schedules",
            lambda conn: self._records(conn, "read_schedules", {"names": None}),
        )

    def get_schedule(self, name: str) -> ScheduleRecord:
        """Return the schedule called `name`, or raise `ScheduleNotFoundError`."""
        found = self._in_transaction(
            f"admin: read schedule {name!r}",
            lambda conn: self._records(conn, "read_schedules", {"names": [name]}),
        )
        if not found:
            raise ScheduleNotFoundError(name)
        return found[0]

    def task_executions(self) -> dict[str, TaskExecution]:
        """Return what every schedule's task executes, by schedule name (DESIGN §10)."""
        return self._in_transaction(
            "admin: read task executions", lambda conn: self._executions(conn, None)
        )

    def status(self, *, lease_ms: int = LEASE_MS_DEFAULT) -> StatusReport:
        """Every schedule at one database instant: due in, claim holder and expiry, runs.

        A schedule is overdue when active and its cursor lies more than `lease_ms` (the
        replicas' lease) plus its misfire grace behind the database clock. A lease outside
        `LEASE_MS_MIN`..`LEASE_MS_MAX` is an `InvalidArgumentError`.
        """
        check_lease(lease_ms)

        def read(conn: psycopg.Connection[Any]) -> StatusReport:
            report = _status(self._rows(conn, "schedule_status", {}), lease_ms)
            return report.model_copy(update={"replication": read_replication_state(conn)})

        return self._in_transaction("admin: status", read)


def _definition_columns(
    definitions: Sequence[ScheduleDefinition | None],
) -> dict[str, list[Any]]:
    """Return the definition columns of each row; None (keep the stored one) sends NULLs."""

    def column(read: Callable[[ScheduleDefinition], Any]) -> list[Any]:
        return [None if d is None else read(d) for d in definitions]

    return {
        "crons": column(lambda d: d.cron),
        "timezones": column(lambda d: d.timezone),
        "policies": column(lambda d: d.misfire_policy.value),
        "graces": column(lambda d: d.misfire_grace_ms),
        "starts": column(lambda d: d.start_at_ms),
        "ends": column(lambda d: d.end_at_ms),
    }


def _record(row: _Row) -> ScheduleRecord:
    """Read a schedule row (lock_schedules, read_schedules, create_schedules) by column name."""
    definition, error = readable_definition(row)
    return ScheduleRecord(
        schedule_id=row["id"],
        task_id=row["task_id"],
        name=row["name"],
        definition=definition,
        cron=row["cron"],
        timezone=row["timezone"],
        state=ScheduleState(row["state"]),
        next_due_at_ms=row["next_due_at_ms"],
        claim_owner_id=row["claim_owner_id"],
        claim_expires_at_ms=row["claim_expires_at_ms"],
        version=row["version"],
        updated_at_ms=row["updated_at_ms"],
        created_at_ms=row["created_at_ms"],
        definition_error=error,
        invalid_reason=row["invalid_reason"],
        invalidated_at_ms=row["invalidated_at_ms"],
    )


def _status(rows: Sequence[_Row], lease_ms: int) -> StatusReport:
    """Sum up schedule_status.sql: one row per schedule (or one without), each with the now."""
    head, *_ = rows  # every row carries the statement's one clock reading and zone rules
    now = int(head["now_ms"])
    schedules = [_schedule_status(row, now, lease_ms) for row in rows if row["id"] is not None]
    dues = [s.next_due_in_ms for s in schedules if s.next_due_in_ms is not None]
    held = sum(1 for s in schedules if s.claim_expires_in_ms)
    return StatusReport(
        database_now_ms=now,
        schedules=tuple(schedules),
        claims_held=held,
        next_due_in_ms=min(dues) if dues else None,
        invalid_schedules=sum(1 for s in schedules if s.state is ScheduleState.INVALID),
        zone_rules_version=head["zone_rules_version"],
        lease_ms=lease_ms,
        schedules_overdue=sum(1 for s in schedules if s.overdue),
    )


def _schedule_status(row: _Row, now: int, lease_ms: int) -> ScheduleStatus:
    state, due, expires = row["state"], row["next_due_at_ms"], row["claim_expires_at_ms"]
    active = state == ScheduleState.ACTIVE.value
    return ScheduleStatus(
        schedule_id=row["id"],
        name=row["name"],
        state=ScheduleState(state),
        next_due_at_ms=due,
        next_due_in_ms=max(due - now, 0) if active and due is not None else None,
        claim_owner_id=row["claim_owner_id"],
        claim_expires_in_ms=max(expires - now, 0) if expires is not None else None,
        version=row["version"],
        runs_admitted=row["runs"],
        last_admitted_at_ms=row["last_admitted_at_ms"],
        invalid_reason=row["invalid_reason"],
        invalidated_at_ms=row["invalidated_at_ms"],
        overdue=active and due is not None and now - due > lease_ms + row["misfire_grace_ms"],
    )
