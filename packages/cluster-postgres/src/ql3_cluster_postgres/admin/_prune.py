"""History retention with verified checkpoints: `prune_history` (DESIGN §7, §11).

The deleting is `ql3.admin_prune_history_v1` (migration 0012), a SECURITY DEFINER function owned
by the schema owner: no QL3 role has DELETE on a history table. Each call is one batch and one
transaction that removes, per schedule, the history below one occurrence boundary and writes a
checkpoint (counts, hash chained over the removed rows' identities) in the same transaction, so a
crash between batches leaves a chain that a rerun simply continues. The cutoff is the function's
own reading of the database clock minus the duration: nothing here reads a clock.
"""

from __future__ import annotations

import re
from typing import Final

import psycopg
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import InvalidArgumentError

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection
from ql3_cluster_postgres._errors import DatabaseError

from ._statements import fetch_rows

__all__ = [
    "PRUNE_BATCH_DEFAULT",
    "PRUNE_BATCH_MAX",
    "PruneBatch",
    "PruneReport",
    "parse_duration_ms",
    "prune_history",
]

PRUNE_BATCH_DEFAULT: Final = 10_000
# The function's own bound: one batch's row ids are held in its arrays.
PRUNE_BATCH_MAX: Final = 100_000
_DURATION: Final = re.compile(r"(?P<count>[0-9]{1,9})(?P<unit>[dhms])")
_UNIT_MS: Final = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000}
# A bound far past any retention anyone asks for, far inside bigint milliseconds.
_DURATION_MAX_MS: Final = 100 * 365 * 86_400_000


class PruneBatch(BaseModel):
    """What one batch did to one schedule (or, dry run, would do over the whole span).

    `seq` is the checkpoint written (None for a dry run). `covered_below_ms` is the occurrence
    boundary: everything of the schedule before it is gone. `clipped_by` says why the boundary
    stops short of the cutoff (cursor, open claim, live attempt, admitted after cutoff, pause
    span, backfill), or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schedule_id: int
    seq: int | None
    cutoff_ms: int
    covered_below_ms: int
    last_occurrence_ms: int | None
    runs: int
    skip_records: int
    attempts: int
    events: int
    clipped_by: str | None
    more: bool


class PruneReport(BaseModel):
    """Every batch of one prune, and the totals; `dry_run` says nothing was written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool
    older_than_ms: int
    batches: int
    checkpoints: tuple[PruneBatch, ...]

    @property
    def runs(self) -> int:
        """Runs removed (or that would be)."""
        return sum(item.runs for item in self.checkpoints)

    @property
    def clipped(self) -> dict[int, str]:
        """Each schedule whose boundary stopped short of the cutoff, and why (the last batch's)."""
        return {
            item.schedule_id: item.clipped_by
            for item in self.checkpoints
            if item.clipped_by is not None
        }


def parse_duration_ms(text: str, argument: str = "--older-than") -> int:
    """Read `30d`, `12h`, `90m` or `45s` as milliseconds; anything else names `argument`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidArgumentError(
            argument, text, "must be a whole number followed by d, h, m or s (30d, 12h, 90m, 45s)"
        )
    value = int(match["count"]) * _UNIT_MS[match["unit"]]
    if not 1 <= value <= _DURATION_MAX_MS:
        raise InvalidArgumentError(argument, text, "must be within 1s..36500d")
    return value


def prune_history(
    conninfo: str,
    *,
    older_than_ms: int,
    batch: int = PRUNE_BATCH_DEFAULT,
    dry_run: bool = False,
    max_batches: int | None = None,
) -> PruneReport:
    """Prune the history older than `older_than_ms` (database clock), batch by batch, as ql3_admin.

    Every batch is one transaction (one call of the function, autocommit): a crash between two
    leaves every batch done so far complete and checkpointed; calling again continues. Stops
    when a batch removes nothing (or after `max_batches`, for tests and benchmarks).

    Raises:
        InvalidArgumentError: `older_than_ms` below the shortest prunable age (longest lease +
            grace + retry span, read from the database; names `--older-than`), or `batch`
            outside 1..`PRUNE_BATCH_MAX` (names `--batch`).
        DatabaseError: the database could not be reached or refused the call.

    """
    if not 1 <= batch <= PRUNE_BATCH_MAX:
        raise InvalidArgumentError("--batch", batch, f"must be within 1..{PRUNE_BATCH_MAX}")
    done: list[PruneBatch] = []
    batches = 0
    try:
        options = ConnectionOptions(conninfo, application_name="ql3-prune")
        with open_connection(options, autocommit=True) as conn:
            floor_ms = int(fetch_rows(conn, "prune_floor", {})[0]["floor_ms"])
            if older_than_ms < floor_ms:
                raise InvalidArgumentError(
                    "--older-than",
                    older_than_ms,
                    f"must be at least {floor_ms} ms (the longest claim lease + misfire grace +"
                    " task retry span + worker lease + successor grace of this database)",
                )
            params = {"older_than_ms": older_than_ms, "batch": batch, "dry_run": dry_run}
            while max_batches is None or batches < max_batches:
                # prune_history.sql names exactly the fields (extra="forbid" says so if not).
                rows = [
                    PruneBatch.model_validate(row)
                    for row in fetch_rows(conn, "prune_history", params)
                ]
                batches += 1
                done.extend(rows)
                if dry_run or not rows:
                    break
    except psycopg.errors.InvalidParameterValue as exc:
        text = exc.diag.message_primary or str(exc)
        argument = "--older-than" if text.startswith("older_than_ms") else "--batch"
        raise InvalidArgumentError(argument, older_than_ms, text) from exc
    except psycopg.Error as exc:
        raise DatabaseError(f"prune_history: cannot prune the QL3 history: {exc}") from exc
    return PruneReport(
        dry_run=dry_run, older_than_ms=older_than_ms, batches=batches, checkpoints=tuple(done)
    )
