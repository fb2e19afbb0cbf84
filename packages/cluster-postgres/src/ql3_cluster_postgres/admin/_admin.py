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

from collections import Counter
from typing import TYPE_CHECKING, Any

from ql3_runtime_core import (
    LEASE_MS_DEFAULT,
    InvalidArgumentError,
    ScheduleDefinition,
    ScheduleState,
    TaskExecution,
    payload_text,
)

from ql3_cluster_postgres._bounds import check_lease
from ql3_cluster_postgres._errors import (
    DuplicateScheduleError,
    ScheduleNotFoundError,
    ScheduleStateError,
)
from ql3_cluster_postgres._pause_span import Replay, replay_of
from ql3_cluster_postgres._replication import read_replication_state

from ._alerts import set_schedule_alerts
from ._backfill import (
    BACKFILL_BATCH_DEFAULT,
    BACKFILL_BATCH_MAX,
    BackfillBatch,
    BackfillPlan,
    BackfillReport,
    plan_backfill,
    send_batch,
)
from ._models import (
    ApplyReport,
    ScheduleRecord,
    ScheduleSpec,
    StatusReport,
)
from ._pauses import (
    PauseSpan,
    apply_pause_settings,
    close_span,
    read_pauses,
    send_pause,
    send_resume,
    set_pause_after_failures,
)
from ._plan import (
    Update,
    reconcile,
    resumed,
    validated,
)
from ._session import AdminSession, database_now, placement_now
from ._statements import (
    create_schedules,
    fetch_records,
    fetch_rows,
    latest_decided,
    read_executions,
    set_executions,
    update_schedules,
)
from ._status import status_report
from ._trigger import (
    ManualRun,
    check_request_id,
    checked_payload,
    find_manual_run,
    send_trigger,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import psycopg
    from ql3_runtime_core import ZoneRules

    from ql3_cluster_postgres._alerts import AlertSettings

__all__ = ["ScheduleAdmin"]


class ScheduleAdmin(AdminSession):
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

    def database_now_ms(self) -> int:
        """Return the database clock in epoch milliseconds."""
        return self._in_transaction("admin: read database clock", database_now)

    def add_schedule(
        self,
        name: str,
        definition: ScheduleDefinition,
        *,
        payload_template: Mapping[str, Any] | None = None,
        execution: TaskExecution | None = None,
        require_occurrence: bool = False,
        pause_after_failures: int | None = None,
        alerts: AlertSettings | None = None,
    ) -> ScheduleRecord:
        """Create task, cron trigger and schedule in one transaction.

        The first cursor is the first occurrence strictly after max(database now,
        start_at_ms - 1). `execution` says what its runs execute (default: a Python task run by
        name, see `TaskExecution`). Raises `DuplicateScheduleError` when the name is taken and
        `InvalidArgumentError` when the payload is over `PAYLOAD_MAX_BYTES` (nothing written).

        With `require_occurrence`, a schedule that would be born `exhausted` (no occurrence left
        in its window after the database's now, say a one-off whose instant has passed) is
        refused with an `InvalidArgumentError` naming `end_at_ms`, and nothing is written: the
        check and the write are one transaction, so no clock read elsewhere can race it.
        """
        spec = validated(
            ScheduleSpec(
                name=name,
                definition=definition,
                execution=execution or TaskExecution(),
                pause_after_failures=pause_after_failures,
                alerts=alerts,
            )
        )
        payload = dict(payload_template or {})
        # Refused here, before anything is written: a payload a command cannot receive would
        # fail every attempt of every run with E2BIG.
        payload_text(payload, field="payload_template")

        action = f"admin: add schedule {name!r}"

        def add(conn: psycopg.Connection[Any]) -> ScheduleRecord:
            rules = self._zone_rules(conn, action)
            # A new row has no lock to wait for and no decided occurrence.
            now = placement_now(conn)
            created = create_schedules(conn, [spec], now, [payload], rules)
            if not created:
                raise DuplicateScheduleError(name)
            if require_occurrence and created[0].state is ScheduleState.EXHAUSTED:
                # Raised inside the transaction: it rolls back, nothing is written.
                raise InvalidArgumentError(
                    "end_at_ms",
                    spec.definition.end_at_ms,
                    f"must leave an occurrence after the database time {now} (epoch ms)",
                )
            set_executions(conn, [(created[0].task_id, spec.execution)])
            set_pause_after_failures(conn, {created[0].schedule_id: spec.pause_after_failures})
            set_schedule_alerts(conn, {created[0].schedule_id: spec.alerts})
            fetch_rows(conn, "notify_schedule_changed", {"reason": "created"})
            return created[0]

        def added(conn: psycopg.Connection[Any]) -> ScheduleRecord | None:
            # The witness of an uncertain add: a schedule of that name with this definition.
            found = fetch_records(conn, "read_schedules", {"names": [name]})
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
                for record in fetch_records(conn, "lock_schedules", {"names": lock_names})
            }
            # Lock first, then read the clock and what was decided (DESIGN §7): a commit can
            # land before the lock, never between the reads and the writes.
            self._step("locked")
            now = placement_now(conn)
            decided = latest_decided(conn, [r.schedule_id for r in stored.values()])
            executions = read_executions(conn, [r.task_id for r in stored.values()])
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
            created = create_schedules(conn, plan.creates, now, [{} for _ in plan.creates], rules)
            if len(created) != len(plan.creates):  # a concurrent admin created one of them
                taken = {spec.name for spec in plan.creates} - {r.name for r in created}
                raise DuplicateScheduleError(min(taken))
            update_schedules(
                conn, plan.updates, {r.schedule_id: r.next_due_at_ms for r in stored.values()}
            )
            task_ids = {r.name: r.task_id for r in stored.values()}
            task_ids.update((record.name, record.task_id) for record in created)
            set_executions(
                conn, [(task_ids[name], execution) for name, execution in plan.executions]
            )
            ids = {r.name: r.schedule_id for r in stored.values()}
            ids.update((record.name, record.schedule_id) for record in created)
            apply_pause_settings(conn, checked, ids, now)
            set_schedule_alerts(conn, {ids[spec.name]: spec.alerts for spec in checked})
            if plan.creates or plan.updates or plan.executions:
                fetch_rows(conn, "notify_schedule_changed", {"reason": "applied"})
            return plan.report

        return self._in_transaction("admin: apply schedules", apply)

    def pause(
        self,
        name: str,
        *,
        reason: str | None = None,
        until_ms: int | None = None,
        until_after_ms: int | None = None,
    ) -> ScheduleRecord:
        """Stop claiming `name` (its cursor is kept) and record the paused span (DESIGN §7).

        Who and when are the database's (session_user, its clock). `until_ms` (an instant) or
        `until_after_ms` (a duration added to the database clock's now) makes the running
        Coordinators resume it by themselves once the database clock reaches it, replaying
        nothing. Pausing a paused schedule changes nothing (its open span stays as it is).
        """
        action = f"admin: pause schedule {name!r}"

        def change(conn: psycopg.Connection[Any]) -> ScheduleRecord:
            send_pause(conn, name, reason, until_ms, until_after_ms)
            (changed,) = fetch_records(conn, "read_schedules", {"names": [name]})
            return changed

        return self._in_transaction(action, change)

    def resume(self, name: str, *, replay: str = Replay.SKIP.value) -> ScheduleRecord:
        """Make a paused or quarantined schedule claimable again.

        A paused one closes its recorded span at the database time: the span's occurrences
        become one skip record of reason `paused`, except those `replay` hands back to the
        Coordinators (`skip` none, the default; `fire_once` the latest; `catch_up` all, which
        are then decided by the misfire policy like any late occurrence; see `_pause_span`).
        A quarantined schedule (state `invalid`) comes back only if its stored definition reads
        now (say, after `ql3 zone-rules adopt` brought rules that know its zone); otherwise apply
        a corrected definition with `apply_schedules`. Bringing it back opens a schedule
        revision; a cursor that is missing, not after the latest run or skip record, or not an
        occurrence of the stored definition is placed anew after them (see `admin/_plan.resumed`).
        """
        chosen = replay_of(replay)
        allowed = {ScheduleState.PAUSED, ScheduleState.INVALID}
        return self._set_state(name, "resume", ScheduleState.ACTIVE, allowed, replay=chosen)

    def pauses(self, name: str | None = None) -> list[PauseSpan]:
        """Return the recorded paused spans of `name` (every schedule's when None), oldest first."""
        found = self._in_transaction(
            "admin: read paused spans",
            lambda conn: read_pauses(conn, None if name is None else [name]),
        )
        if name is not None and not found:
            self.get_schedule(name)  # raises ScheduleNotFoundError for an unknown name
        return found

    def retire(self, name: str) -> ScheduleRecord:
        """Retire `name` for good: never claimed again, its history kept."""
        allowed = {
            ScheduleState.ACTIVE,
            ScheduleState.PAUSED,
            ScheduleState.EXHAUSTED,
            ScheduleState.INVALID,
        }
        return self._set_state(name, "retire", ScheduleState.RETIRED, allowed)

    def trigger_run(
        self, name: str, request_id: str, *, payload: Mapping[str, Any] | None = None
    ) -> ManualRun:
        """Admit one manual Run of schedule `name` now, once per `request_id` (DESIGN §7).

        Executed by workers like any Run (a queued first attempt of the schedule's task) with
        `payload`, or the task's template when None. The same `request_id` again returns the Run
        already admitted (`existed`), as does settling a COMMIT whose reply was lost: the request
        is read back after the durability barrier and sent again only if absent. Paused and
        exhausted schedules are triggered; retired and quarantined ones are refused.

        Raises:
            InvalidArgumentError: a malformed `request_id`, a payload that is not a JSON object
                or is over `PAYLOAD_MAX_BYTES`, or a `request_id` already used for another
                schedule or payload (nothing written).
            ScheduleNotFoundError: no schedule is named `name`.
            ScheduleStateError: the schedule is retired or quarantined.

        """
        check_request_id(request_id)
        given = checked_payload(payload)
        return self._in_transaction(
            f"admin: trigger schedule {name!r} (request {request_id!r})",
            lambda conn: send_trigger(conn, name, request_id, given),
            landed=lambda conn: find_manual_run(conn, request_id),
        )

    def plan_backfill(
        self, name: str, from_ms: int, to_ms: int, *, include_before_creation: bool = False
    ) -> BackfillPlan:
        """Compute what a backfill of `name` over `[from_ms, to_ms]` admits; writes nothing.

        Occurrences are computed with each revision's definition and the zone rules version it
        was computed with, as the database stores them (see `plan_backfill` in `_backfill`).
        """

        def plan(conn: psycopg.Connection[Any]) -> BackfillPlan:
            recorded = self._zone_rules(conn, f"admin: backfill schedule {name!r}")

            def rules_of(version: str | None) -> ZoneRules:
                if version is None or version == recorded.version:
                    return recorded
                return self._stored_rules(conn, version, f"admin: backfill schedule {name!r}")

            return plan_backfill(
                conn,
                name,
                from_ms,
                to_ms,
                include_before_creation=include_before_creation,
                rules_of=rules_of,
            )

        return self._in_transaction(f"admin: plan backfill of schedule {name!r}", plan)

    def backfill(  # one request: its plan, then its batches
        self,
        name: str,
        from_ms: int,
        to_ms: int,
        *,
        request_id: str,
        include_before_creation: bool = False,
        batch_size: int = BACKFILL_BATCH_DEFAULT,
        dry_run: bool = False,
        progress: Callable[[BackfillBatch, int, int], None] | None = None,
    ) -> BackfillReport:
        """Admit, once each, the occurrences of `[from_ms, to_ms]` of `name` that have no Run.

        Those a skip record covers (any reason), and with `include_before_creation` those before
        the schedule's first cursor; never one after its cursor (`to_ms` is clipped, the plan
        says so), outside its window or after the database clock. Each batch of `batch_size` is
        one transaction; `progress(batch, done, total)` is called after each commits. The same
        `request_id` again resumes: what has a Run is left alone, the rest is admitted. A batch
        whose COMMIT reply was lost is sent again: it admits only what is still missing.
        `dry_run` plans and writes nothing.

        Raises:
            InvalidArgumentError: a malformed `request_id`, `batch_size` outside
                1..`BACKFILL_BATCH_MAX`, `from_ms` after `to_ms`, a span over
                `MAX_BACKFILL_OCCURRENCES`, or a `request_id` used for another request.
            ScheduleNotFoundError: no schedule is named `name`.
            ScheduleStateError: the schedule is retired or quarantined.

        """
        check_request_id(request_id)
        if from_ms > to_ms:
            raise InvalidArgumentError("--from", from_ms, f"must be at or before --to ({to_ms})")
        if not 1 <= batch_size <= BACKFILL_BATCH_MAX:
            raise InvalidArgumentError(
                "--batch", batch_size, f"must be within 1..{BACKFILL_BATCH_MAX}"
            )
        plan = self.plan_backfill(
            name, from_ms, to_ms, include_before_creation=include_before_creation
        )
        pending = plan.occurrences
        if dry_run:
            return BackfillReport(
                request_id=request_id,
                plan=plan,
                dry_run=True,
                admitted=0,
                already_run=plan.already_run,
                before_creation_left=plan.before_creation_left,
                batches=0,
                backfill_id=None,
                state=None,
            )
        admitted, raced, done = 0, 0, 0
        chunks = [pending[i : i + batch_size] for i in range(0, len(pending), batch_size)] or [()]
        batch: BackfillBatch | None = None
        for number, chunk in enumerate(chunks, start=1):
            last = number == len(chunks)
            batch = self._in_transaction(
                f"admin: backfill schedule {name!r} (request {request_id!r}, batch {number})",
                lambda conn, chunk=chunk, last=last: send_batch(  # type: ignore[misc]
                    conn, plan, request_id, chunk, last=last
                ),
            )
            admitted += batch.admitted
            raced += batch.already_run
            done += len(chunk)
            if progress is not None:
                progress(batch, done, len(pending))
        assert batch is not None  # noqa: S101  # at least one (maybe empty) batch is sent
        return BackfillReport(
            request_id=request_id,
            plan=plan,
            dry_run=False,
            admitted=admitted,
            already_run=plan.already_run + raced,
            before_creation_left=plan.before_creation_left,
            batches=len(chunks),
            backfill_id=batch.backfill_id,
            state=batch.state,
        )

    def _set_state(
        self,
        name: str,
        action: str,
        target: ScheduleState,
        allowed: set[ScheduleState],
        *,
        replay: Replay = Replay.SKIP,
    ) -> ScheduleRecord:
        def change(conn: psycopg.Connection[Any]) -> ScheduleRecord:
            # Resuming may place a cursor: the rules are held before the row (an adopt's order).
            rules = None
            if target is ScheduleState.ACTIVE:
                rules = self._zone_rules(conn, f"admin: {action} schedule {name!r}")
            locked = fetch_records(conn, "lock_schedules", {"names": [name]})
            if not locked:
                raise ScheduleNotFoundError(name)
            record = locked[0]
            if record.state is target:
                # Idempotent: nothing written, no version bump, so a held claim is not raced.
                return record
            if record.state not in allowed:
                raise ScheduleStateError(name, record.state.value, action)
            if rules is not None and record.state is ScheduleState.PAUSED:
                # The recorded span ends now; its occurrences are accounted (DESIGN §7).
                self._step("locked")
                send_resume(conn, record, replay, rules)
                fetch_rows(conn, "notify_schedule_changed", {"reason": action})
                (resumed_record,) = fetch_records(conn, "read_schedules", {"names": [name]})
                return resumed_record
            if rules is not None:
                if record.definition is None:
                    detail = (
                        f"its stored definition still cannot be read ({record.definition_error});"
                        " apply a corrected one (ql3 schedule apply)"
                    )
                    raise ScheduleStateError(name, record.state.value, action, detail)
                # The row is locked: now read the clock and what was decided (DESIGN §7).
                self._step("locked")
                now = placement_now(conn)
                decided = latest_decided(conn, [record.schedule_id])
                decided_ms = decided.get(record.schedule_id)
                update = resumed(record, record.definition, now, decided_ms, rules)
            else:
                close_span(conn, record)  # retired while paused: the span ends now
                # Retire keeps the definition (None) and the cursor as they are.
                update = Update(record.schedule_id, None, record.next_due_at_ms, target)
            update_schedules(conn, [update], {record.schedule_id: record.next_due_at_ms})
            fetch_rows(conn, "notify_schedule_changed", {"reason": action})
            # Read back: the version and times are what the statement wrote, by database time.
            (changed,) = fetch_records(conn, "read_schedules", {"names": [name]})
            return changed

        return self._in_transaction(f"admin: {action} schedule {name!r}", change)

    def list_schedules(self) -> list[ScheduleRecord]:
        """Return every schedule (all states), ordered by name."""
        return self._in_transaction(
            "admin: list schedules",
            lambda conn: fetch_records(conn, "read_schedules", {"names": None}),
        )

    def get_schedule(self, name: str) -> ScheduleRecord:
        """Return the schedule called `name`, or raise `ScheduleNotFoundError`."""
        found = self._in_transaction(
            f"admin: read schedule {name!r}",
            lambda conn: fetch_records(conn, "read_schedules", {"names": [name]}),
        )
        if not found:
            raise ScheduleNotFoundError(name)
        return found[0]

    def task_executions(self) -> dict[str, TaskExecution]:
        """Return what every schedule's task executes, by schedule name (DESIGN §10)."""
        return self._in_transaction(
            "admin: read task executions", lambda conn: read_executions(conn, None)
        )

    def status(self, *, lease_ms: int = LEASE_MS_DEFAULT) -> StatusReport:
        """Every schedule at one database instant: due in, claim holder and expiry, runs.

        A schedule is overdue when active and its cursor lies more than `lease_ms` (the
        replicas' lease) plus its misfire grace behind the database clock. A lease outside
        `LEASE_MS_MIN`..`LEASE_MS_MAX` is an `InvalidArgumentError`.
        """
        check_lease(lease_ms)

        def read(conn: psycopg.Connection[Any]) -> StatusReport:
            report = status_report(fetch_rows(conn, "schedule_status", {}), lease_ms)
            return report.model_copy(update={"replication": read_replication_state(conn)})

        return self._in_transaction("admin: status", read)
