"""Rows of the repository's statements, read by column name (`named_row`), never by position.

The column names of each statement's SELECT or RETURNING list are the field names of its row
class below: renaming or dropping a column fails the first execution loudly (`RowShapeError`)
instead of shifting values into the wrong field, and a reordered list is read correctly.

Why named tuples and not pydantic models: the claim and commit statements run many times per
second, and their rows only carry values into runtime-core's models, which validate them anyway.
A named tuple is built at C speed once its columns are checked (about 1 µs for a claim round of 16
rows, against 45 to 60 µs for `class_row` into a dataclass or a pydantic model; measured on
the bench machine), and mypy still sees each field's type.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from uuid import UUID  # noqa: TC003  # field types of the row classes, resolved at run time

if TYPE_CHECKING:
    from collections.abc import Sequence

    from psycopg._cursor_base import BaseCursor  # the type psycopg's RowFactory is called with
    from psycopg.rows import RowFactory, RowMaker

__all__ = [
    "ClaimedRow",
    "ClusterStateRow",
    "CommitRow",
    "DueInRow",
    "FoundRun",
    "NowRow",
    "OverdueRow",
    "QuarantinedRow",
    "ReleasedRow",
    "ReplicationRow",
    "RowShapeError",
    "ScheduleLocation",
    "named_row",
]


_NT = TypeVar("_NT", bound=tuple[Any, ...])


class RowShapeError(LookupError):
    """A statement's columns are not the fields of the row class it is read into (a bug)."""


def named_row(cls: type[_NT]) -> RowFactory[_NT]:
    """Return a psycopg row factory reading each row into named tuple `cls` by column name.

    The result's column names are matched to `cls._fields` once per distinct set of names (read
    from the raw result, not `cursor.description`, which builds a typed Column per column and
    cost more than the rows themselves); rows are then built without looking at names again.
    """
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]  # a NamedTuple class
    make: RowMaker[_NT] = cls._make  # type: ignore[attr-defined]  # NamedTuple's C-speed maker
    makers: dict[tuple[bytes | None, ...], RowMaker[_NT]] = {}

    def factory(cursor: BaseCursor[Any, Any]) -> RowMaker[_NT]:
        result = cursor.pgresult
        if result is None:  # pragma: no cover - psycopg asks only once a result is there
            return make
        raw = tuple(result.fname(i) for i in range(result.nfields))
        # Keyed by the raw names: one statement's results always share them, so the decoding
        # and matching below run once per statement, not once per execution.
        maker = makers.get(raw)
        if maker is None:
            encoding = cursor.connection.info.encoding
            names = tuple((name or b"").decode(encoding) for name in raw)
            maker = makers[raw] = _maker(cls, make, fields, names)
        return maker

    return factory


def _maker(
    cls: type[_NT], make: RowMaker[_NT], fields: tuple[str, ...], names: tuple[str, ...]
) -> RowMaker[_NT]:
    """Return how to build `cls` from rows with columns `names`, or refuse a mismatch."""
    if names == fields:
        # The usual case: the SQL lists the columns in field order, so no reordering per row.
        return make
    if sorted(names) != sorted(fields):
        msg = f"{cls.__name__}: the statement returns columns {names}, the row has {fields}"
        raise RowShapeError(msg)
    # itemgetter of several indexes returns a tuple, which `make` needs; a one-field row never
    # gets here (its one name either equals its field or was refused above).
    pick = operator.itemgetter(*(names.index(name) for name in fields))

    def reordered(values: Sequence[Any]) -> _NT:
        return make(pick(values))

    return reordered


class ClaimedRow(NamedTuple):
    """One row of `claim_due_schedules`: the recorded zone rules and, if claimed, one claim.

    The statement always returns at least one row, carrying the recorded version; the claim
    columns are NULL in it when nothing was claimed: the field types hold only for rows whose
    `schedule_id` is not None (`claimed`).
    """

    recorded_zone_rules_version: str | None
    schedule_id: int
    task_id: int
    version: int
    owner_id: str
    claim_token: UUID
    claim_acquired_at_ms: int
    claim_expires_at_ms: int
    next_due_at_ms: int
    cron: str
    timezone: str
    misfire_policy: str
    misfire_grace_ms: int
    start_at_ms: int | None
    end_at_ms: int | None
    ctid: str

    @property
    def claimed(self) -> bool:
        """False for the row that only carries the recorded version (nothing claimed)."""
        return self.schedule_id is not None  # type: ignore[redundant-expr,unused-ignore]  # NULL when nothing was claimed

    def definition_columns(self) -> tuple[Any, ...]:
        """Return the definition columns as `definition_from_columns` takes them (a cache key)."""
        return (
            self.cron,
            self.timezone,
            self.misfire_policy,
            self.misfire_grace_ms,
            self.start_at_ms,
            self.end_at_ms,
        )


class CommitRow(NamedTuple):
    """The one row of `commit_decisions`: its observation and what it wrote.

    Runs and attempts come as parallel arrays, both ordered by run id (one attempt per run).
    """

    observed_at_ms: int
    regressed_schedule_id: int | None
    regressed_acquired_ms: int | None
    fenced_schedule_ids: list[int]
    run_ids: list[int]
    attempt_ids: list[int]
    run_schedule_ids: list[int]
    run_task_ids: list[int]
    run_scheduled_for_ms: list[int]
    attempt_run_ids: list[int]
    events_written: int
    notifications: int
    skip_records_written: int

    @property
    def regression(self) -> tuple[int, int] | None:
        """The (schedule id, acquired time) of a claim newer than the observation, if any.

        Set only when the database clock read earlier than a claim's acquired time; the
        statement then wrote nothing.
        """
        if self.regressed_schedule_id is None or self.regressed_acquired_ms is None:
            return None
        return (self.regressed_schedule_id, self.regressed_acquired_ms)


class FoundRun(NamedTuple):
    """One row of `find_committed_runs`: a run of a decided occurrence, whoever admitted it."""

    run_id: int
    attempt_id: int | None
    schedule_id: int
    task_id: int
    scheduled_for_ms: int
    created_at_ms: int
    owner_id: str
    claim_token: UUID


class QuarantinedRow(NamedTuple):
    """One row of `quarantine_claims`: a schedule put in state `invalid`, and why and when."""

    schedule_id: int
    reason: str
    quarantined_at_ms: int


class ScheduleLocation(NamedTuple):
    """One row of `find_schedule_ctids`: where a schedule row lives now."""

    schedule_id: int
    ctid: str


class NowRow(NamedTuple):
    """`database_now_ms`: the database clock in epoch milliseconds."""

    now_ms: int


class DueInRow(NamedTuple):
    """`next_due_in_ms`: milliseconds until the earliest claimable cursor (no row: none)."""

    due_in_ms: int | None


class OverdueRow(NamedTuple):
    """`count_overdue_schedules`: active schedules no replica is deciding."""

    overdue: int


class ClusterStateRow(NamedTuple):
    """`read_cluster_state`: the recorded zone rules version and the quarantined count."""

    zone_rules_version: str | None
    invalid: int


class ReplicationRow(NamedTuple):
    """`read_replication_state`: the node's role, history and replication mode (DESIGN §13)."""

    in_recovery: bool
    system_identifier: str
    timeline: int | None
    host: str | None
    port: int | None
    standbys: int
    sync_standbys: int | None
    synchronous_standby_names: str
    synchronous_commit: str
    commits_wait_for_standby: bool


class ReleasedRow(NamedTuple):
    """`release_claims`: claims released and wake-ups sent (one at most)."""

    released: int
    notified: int
