"""Backfills a schedule file requests (`[[backfill]]` tables of `ql3 schedule apply FILE`).

Like a `[[trigger]]`, a backfill is an action a file may ask for, and a file is applied again and
again: each `[[backfill]]` names its schedule, the span (`from`, `to`: instants with an offset)
and a required `request_id`, the key that makes `ql3 schedule backfill` resumable (DESIGN §7).
The first apply admits the span's skipped occurrences; a later apply of the same file finds them
admitted and writes nothing, and one that follows a crash admits only the rest. The whole file is
checked before any connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ql3_cluster_postgres import BACKFILL_BATCH_DEFAULT, check_request_id
from ql3_runtime_core import InvalidArgumentError

from ._config import ConfigurationError
from ._file_tables import read_requests, request_table
from ._schedule_window import parse_instant

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["BACKFILL_KEYS", "BackfillRequest", "load_backfill_requests"]

BACKFILL_KEYS = ("schedule", "from", "to", "request_id", "include_before_creation", "batch")


@dataclass(frozen=True)
class BackfillRequest:
    """One backfill a file asks for; times are epoch ms of the instants it wrote."""

    schedule: str
    from_ms: int
    to_ms: int
    request_id: str
    include_before_creation: bool = False
    batch: int = BACKFILL_BATCH_DEFAULT


def _request(where: str, given: object) -> BackfillRequest:
    entry = request_table(where, given, BACKFILL_KEYS, "backfill")
    for key in ("from", "to"):
        if key not in entry:
            raise ConfigurationError(f"{where}: {key!r} is required (ISO 8601 with an offset)")
    flag = entry.get("include_before_creation", False)
    if not isinstance(flag, bool):
        raise ConfigurationError(f"{where}: include_before_creation={flag!r} must be true or false")
    batch = entry.get("batch", BACKFILL_BATCH_DEFAULT)
    if not isinstance(batch, int) or isinstance(batch, bool):
        raise ConfigurationError(f"{where}: batch={batch!r} must be an integer")
    # TOML reads an unquoted `from = 2027-03-01T00:00:00+01:00` as a datetime: the same instant.
    start, end = (
        value.isoformat() if isinstance(value, datetime) else value
        for value in (entry["from"], entry["to"])
    )
    from_ms = parse_instant(start, f"{where}: from")
    to_ms = parse_instant(end, f"{where}: to")
    if from_ms > to_ms:
        raise ConfigurationError(f"{where}: from {entry['from']!r} is after to {entry['to']!r}")
    try:
        request_id = check_request_id(entry["request_id"])
    except InvalidArgumentError as exc:
        raise ConfigurationError(f"{where}: {exc}") from exc
    return BackfillRequest(entry["schedule"], from_ms, to_ms, request_id, flag, batch)


def load_backfill_requests(path: Path) -> list[BackfillRequest]:
    """Read the `[[backfill]]` tables of a schedule file, checked whole (no connection).

    The batch size's bounds are checked by `ScheduleAdmin.backfill` (before it writes anything).

    Raises:
        ConfigurationError: unreadable file, bad syntax, an unknown or missing key, a time
            without an offset, `from` after `to`, a malformed or repeated request id.

    """
    return read_requests(path, "backfill", _request)
