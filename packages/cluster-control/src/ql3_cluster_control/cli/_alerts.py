"""`ql3 alerts list`: the alerts the database recorded, with their delivery so far."""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from ql3_cluster_postgres import HistoryReader
from rich.table import Table

from ._common import AsJson, Dsn, guarded, print_json, require_dsn
from ._tables import cell, print_table
from ._time_text import format_ms

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_cluster_postgres import AlertRecord

__all__ = [
    "AlertCommand",
    "AlertDeadline",
    "AlertKindOption",
    "AlertOn",
    "AlertWebhook",
    "alerts_list",
    "alerts_table",
]

# `ql3 schedule add`'s alert flags (read with a schedule file's keys by `_alert_keys`).
AlertOn = Annotated[
    str | None,
    typer.Option(
        "--alert-on", help="Comma-separated kinds to be alerted about: missed,late,failed,paused."
    ),
]
AlertCommand = Annotated[
    str | None,
    typer.Option(
        "--alert-command",
        help="Shell command run for each alert, with QL3_ALERT_* variables (QL3_ALERT_ID is"
        " the idempotency key).",
    ),
]
AlertWebhook = Annotated[
    str | None,
    typer.Option(
        "--alert-webhook",
        help="http(s) URL that receives each alert as a JSON POST (Idempotency-Key header).",
    ),
]
AlertDeadline = Annotated[
    str | None,
    typer.Option(
        "--alert-deadline",
        help="For late: a Run not succeeded this long after its scheduled time (90s, 15m, 2h).",
    ),
]


class AlertKindOption(StrEnum):
    """The kinds `ql3 alerts list --kind` filters on (`alerts.kind`)."""

    MISSED = "missed"
    LATE = "late"
    FAILED = "failed"
    PAUSED = "paused"


def alerts_table(alerts: Sequence[AlertRecord]) -> Table:
    """Build the `ql3 alerts list` table: one row per alert, newest first."""
    table = Table(box=None, pad_edge=False)
    for column in (
        "alert", "kind", "schedule", "subject", "raised (UTC)", "delivery", "attempts",
        "delivered (UTC)", "last error",
    ):  # fmt: skip
        table.add_column(column)
    for alert in alerts:
        subject = (
            f"occurrence {format_ms(alert.occurrence_ms)}"
            if alert.occurrence_ms is not None
            else f"run {alert.run_id}"
            if alert.run_id is not None
            else f"pause {alert.subject_key}"
        )
        table.add_row(
            str(alert.alert_id),
            alert.kind,
            cell(alert.schedule),
            subject,
            format_ms(alert.raised_at_ms),
            alert.delivery_state,
            str(alert.delivery_attempts),
            format_ms(alert.delivered_at_ms),
            cell(alert.last_error or "-"),
        )
    return table


@guarded
def alerts_list(
    kind: Annotated[
        AlertKindOption | None, typer.Option("--kind", help="Only alerts of this kind.")
    ] = None,
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only alerts of this schedule.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 50,
    as_json: AsJson = False,
    dsn: Dsn = None,
) -> None:
    """List recorded alerts, newest first: kind, subject, when (database time), delivery.

    An alert is recorded once per schedule, kind and subject (an occurrence for missed, a Run for
    late and failed, a pause for paused); delivery is retried with backoff until it succeeds.
    """
    with HistoryReader(require_dsn(dsn)) as reader:
        alerts = reader.alerts(
            kind=None if kind is None else kind.value, schedule=schedule, limit=limit
        )
    if as_json:
        print_json([alert.model_dump(mode="json") for alert in alerts])
    else:
        print_table(alerts_table(alerts))
