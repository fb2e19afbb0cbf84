"""`record_verify_report`: keep a `ql3 verify` verdict for the console (`ql3 verify --record`).

The verdict is written as `ql3_admin` into `ql3.verify_results` (migration 0014); the database
stamps when it was recorded (its clock) and by whom, so the console shows a time that came from
the database, like every other (DESIGN §1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from ql3_cluster_postgres._connect import ConnectionOptions, open_connection, wrap_error
from ql3_cluster_postgres._send import send

if TYPE_CHECKING:
    from ql3_cluster_postgres.verify import VerifyReport

__all__ = ["record_verify_report"]


class _Recorded(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: int
    recorded_at_ms: int


def record_verify_report(conninfo: str, report: VerifyReport) -> int:
    """Store `report` as the latest verify verdict; return the row's id.

    Raises:
        DatabaseError: the row could not be written (e.g. the login is not `ql3_admin`).

    """
    params: dict[str, Any] = {
        "checked_at_ms": report.checked_at_ms,
        "ok": report.ok,
        "schedules": report.schedules,
        "runs": report.runs,
        "violation_total": sum(report.violation_counts.values()),
        "violation_counts": Jsonb(report.violation_counts),
        "violations": Jsonb([item.model_dump(mode="json") for item in report.violations]),
    }
    options = ConnectionOptions(conninfo, application_name="ql3-verify")
    try:
        with open_connection(options) as conn, conn.cursor(row_factory=class_row(_Recorded)) as cur:
            row = send(cur, "record_verify_result", params).fetchone()
    except psycopg.Error as exc:
        raise wrap_error(exc, "verify: record") from exc
    if row is None:  # an INSERT ... RETURNING always answers one row
        msg = "verify: record: the INSERT returned no row"
        raise AssertionError(msg)
    return row.id
