"""`ql3 schedule trigger NAME [--request-id ID] [--payload JSON]` (as ql3_admin).

Admits one manual Run now, executed by workers like any Run. The request id is the idempotency
key: the same id twice gives one Run (the second call prints the first one's Run, says so, and
exits 0), and a lost COMMIT reply is settled by `ScheduleAdmin.trigger_run` from the database
(read back by request id, sent again only if absent). An id is generated when none is given and
printed with the Run, so an operator can repeat the exact request after an interruption.
"""

# typer builds options from parameters with defaults.
# ruff: noqa: FBT002

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import typer
from ql3_cluster_postgres import ManualRun, ScheduleAdmin
from ql3_runtime_core import InvalidArgumentError

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._time_text import format_ms

__all__ = ["parse_payload", "schedule_trigger"]


def parse_payload(text: str | None) -> dict[str, Any] | None:
    """Read `--payload` as a JSON object (None: the schedule's template); name it when refused."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError("--payload", text, f"must be JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise InvalidArgumentError("--payload", text, "must be a JSON object")
    return value


def trigger_text(run: ManualRun) -> str:
    """One line an operator can act on: which Run, for which request, new or found."""
    at = format_ms(run.created_at_ms)
    payload = "the schedule's payload template" if run.payload is None else "its own payload"
    if run.existed:
        return (
            f"request {run.request_id!r} was already admitted: manual run {run.run_id} of"
            f" schedule {run.schedule_name!r} at {at} (nothing written)"
        )
    return (
        f"manual run {run.run_id} of schedule {run.schedule_name!r} admitted at {at} for"
        f" request {run.request_id!r}, with {payload}"
    )


@guarded
def schedule_trigger(
    name: Annotated[str, typer.Argument(help="The schedule to run now.")],
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            help="Idempotency key (1..128 of A-Z a-z 0-9 . _ : -): the same id again gives the"
            " same Run. Generated and printed when absent.",
        ),
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", help="A JSON object for this Run instead of the schedule's template."
        ),
    ] = None,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """Admit one manual Run of NAME now (paused schedules too; retired or quarantined: refused).

    It is its own kind in the history: it never fills an occurrence of the cron series, and
    `ql3 status`, `ql3 runs list` and `ql3 verify` count it apart.
    """
    given = parse_payload(payload)
    key = request_id if request_id is not None else str(uuid.uuid4())
    with ScheduleAdmin(require_dsn(dsn)) as admin:
        run = admin.trigger_run(name, key, payload=given)
    if as_json:
        print_json(run.model_dump(mode="json"))
    else:
        typer.echo(trigger_text(run))
