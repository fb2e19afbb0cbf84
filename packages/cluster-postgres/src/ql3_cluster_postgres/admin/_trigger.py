"""Trigger now: one manual Run of a schedule per request id (DESIGN §7, §11).

The write is `ql3.admin_trigger_run_v1` (migration 0008), a SECURITY DEFINER function: the admin
role has no INSERT on any history table. The request id is the idempotency key: the same id twice
gives one Run, and a COMMIT whose reply was lost is settled by reading the request back from the
database (`find_manual_run.sql`) after the durability barrier, the trigger being sent again only
when the request is absent. Nothing here reads a clock: the Run's instant is the function's one
observation of the database clock.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict
from ql3_runtime_core import InvalidArgumentError, payload_text

from ql3_cluster_postgres._errors import ScheduleNotFoundError, ScheduleStateError

from ._statements import fetch_rows

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "REQUEST_ID_PATTERN",
    "ManualRun",
    "check_request_id",
    "checked_payload",
    "fetch_request_rows",
    "find_manual_run",
    "send_trigger",
]

# The CHECK runs_request_id_shape of migration 0008: printable in a shell, a log and a URL.
REQUEST_ID_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
_REQUEST_ID: Final = re.compile(REQUEST_ID_PATTERN)
_REQUEST_ID_RULE: Final = (
    "must be 1..128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit"
)

# SQLSTATEs ql3.admin_trigger_run_v1 refuses with (migration 0008).
_NO_SUCH_SCHEDULE: Final = "P0002"
_REFUSED_STATE: Final = "55000"
_REQUEST_REUSED: Final = "23505"


class ManualRun(BaseModel):
    """One manual Run as the database recorded it; every time is the database clock's.

    `existed` says the request had already been admitted (this call wrote nothing).
    `payload` is None when the Run executes with its task's payload template.
    `requested_by` is the database login that triggered it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: int
    attempt_id: int | None
    schedule_id: int
    task_id: int
    schedule_name: str
    request_id: str
    scheduled_for_ms: int
    created_at_ms: int
    payload: dict[str, Any] | None
    requested_by: str
    existed: bool


def fetch_request_rows(
    conn: psycopg.Connection[Any],
    statement: tuple[str, Mapping[str, Any]],
    request: tuple[str, str],
    refused: tuple[str, str],
) -> list[dict[str, Any]]:
    """Send one admin request function (trigger, backfill batch); its refusals as typed errors.

    `statement` is the statement and its parameters, `request` the schedule name and request
    id, `refused` the action and why a state refuses it. The functions refuse with the same
    SQLSTATEs: no schedule (P0002), its state (55000, the state in the detail), a request id
    used for another request (23505), an argument (22023, the message naming it first).
    """
    name, request_id = request
    action, why = refused
    try:
        return fetch_rows(conn, *statement)
    except psycopg.errors.NoDataFound as exc:
        raise ScheduleNotFoundError(name) from exc
    except psycopg.errors.ObjectNotInPrerequisiteState as exc:
        state = exc.diag.message_detail or "unknown"
        raise ScheduleStateError(name, state, action, why) from exc
    except psycopg.errors.UniqueViolation as exc:
        raise InvalidArgumentError(
            "request_id", request_id, f"must not be reused ({exc.diag.message_primary})"
        ) from exc
    except psycopg.errors.InvalidParameterValue as exc:
        text = exc.diag.message_primary or str(exc)
        argument = text.split(":", 1)[0]
        raise InvalidArgumentError(argument, text, "refused by the database") from exc


def check_request_id(request_id: str) -> str:
    """Return `request_id` if the database will accept it, else raise `InvalidArgumentError`."""
    if not _REQUEST_ID.fullmatch(request_id):
        raise InvalidArgumentError("request_id", request_id, _REQUEST_ID_RULE)
    return request_id


def _run(row: Mapping[str, Any]) -> ManualRun:
    return ManualRun(
        run_id=row["run_id"],
        attempt_id=row["attempt_id"],
        schedule_id=row["schedule_id"],
        task_id=row["task_id"],
        schedule_name=row["schedule_name"],
        request_id=row["request_id"],
        scheduled_for_ms=row["scheduled_for_ms"],
        created_at_ms=row["created_at_ms"],
        payload=row["payload"],
        requested_by=row["requested_by"],
        existed=row["existed"],
    )


def send_trigger(
    conn: psycopg.Connection[Any],
    name: str,
    request_id: str,
    payload: Mapping[str, Any] | None,
) -> ManualRun:
    """Send the trigger in the caller's transaction; refusals become typed QL3 errors.

    Raises:
        ScheduleNotFoundError: no schedule is named `name`.
        ScheduleStateError: the schedule is retired or quarantined (`invalid`).
        InvalidArgumentError: the request id was already used for another schedule or another
            payload (naming `request_id`), or the database refused an argument.

    """
    params = {
        "schedule": name,
        "request_id": request_id,
        "payload": None if payload is None else Jsonb(dict(payload)),
    }
    rows = fetch_request_rows(
        conn,
        ("trigger_run", params),
        (name, request_id),
        ("trigger", "it admits no Run until apply or resume brings it back"),
    )
    return _run(rows[0])


def find_manual_run(conn: psycopg.Connection[Any], request_id: str) -> ManualRun | None:
    """Read back the manual Run of `request_id`, or None when the request never landed."""
    rows = fetch_rows(conn, "find_manual_run", {"request_id": request_id})
    return _run(rows[0]) if rows else None


def checked_payload(payload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Refuse, before anything is sent, a payload a command could not receive (names `payload`)."""
    if payload is None:
        return None
    payload_text(payload, field="payload")
    return dict(payload)
