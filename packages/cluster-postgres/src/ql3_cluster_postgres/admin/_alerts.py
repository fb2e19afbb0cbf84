"""What a schedule asks to be alerted about, written with its definition (migration 0013).

`add` and `apply` write each spec's `AlertSettings` (no settings: no alert) through
`ql3.admin_set_alerts_v1` in the transaction that writes the definition, so a schedule never
exists, even for a moment, without the alerts it asked for. The function starts the `late`
watermark at the database time: Runs scheduled before `late` was asked for are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres._alerts import AlertSettings

from ._statements import fetch_rows

if TYPE_CHECKING:
    from collections.abc import Mapping

    import psycopg

__all__ = ["set_schedule_alerts"]

_NONE = AlertSettings()


def set_schedule_alerts(
    conn: psycopg.Connection[Any], settings: Mapping[int, AlertSettings | None]
) -> None:
    """Write each schedule's alert settings (by schedule id; None: no alerts), one statement."""
    if not settings:
        return
    wanted = [alerts or _NONE for alerts in settings.values()]
    fetch_rows(
        conn,
        "set_schedule_alerts",
        {
            "schedule_ids": list(settings),
            "alert_ons": [",".join(alerts.alert_on) for alerts in wanted],
            "commands": [alerts.command for alerts in wanted],
            "webhooks": [alerts.webhook for alerts in wanted],
            "deadlines": [alerts.deadline_ms for alerts in wanted],
        },
    )
