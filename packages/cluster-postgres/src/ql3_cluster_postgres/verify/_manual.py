"""The `manual_run` rule: manual Runs ("trigger now", migration 0008) as the trigger writes them.

A manual Run is no occurrence: the accounting rules never see it (their statements read cron
runs only), and its attempts and events are judged by `shape` and `attempts` like any Run's.
What is left to judge is what makes it a manual Run: admitted at the very instant it is for (the
trigger's one reading of the database clock), not before its schedule existed, not after the
database clock, and announced by a `run.admitted` event naming its request id. One Run per request
is a UNIQUE constraint of the table (`runs_request_unique`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._report import Findings

__all__ = ["check_manual_runs"]


def check_manual_runs(findings: Findings, rows: Iterable[dict[str, Any]], *, now_ms: int) -> None:
    """Report each manual Run `verify_manual_runs.sql` returned, once per broken condition."""
    for row in rows:
        run, schedule_id = row["id"], row["schedule_id"]
        label = f"manual run {run} (request {row['request_id']!r})"
        if row["scheduled_for_ms"] != row["created_at_ms"]:
            findings.add(
                "manual_run",
                schedule_id,
                f"{label} is for {row['scheduled_for_ms']} but was admitted at"
                f" {row['created_at_ms']}: a trigger is for the instant it is admitted",
            )
        created = row["schedule_created_ms"]
        if created is not None and row["created_at_ms"] < created:
            findings.add(
                "manual_run",
                schedule_id,
                f"{label} was admitted at {row['created_at_ms']}, before its schedule was"
                f" created at {created}",
            )
        if row["created_at_ms"] > now_ms:
            findings.add(
                "manual_run",
                schedule_id,
                f"{label} was admitted at {row['created_at_ms']}, after the database clock"
                f" {now_ms}",
            )
        if row["admitted_request_id"] != row["request_id"]:
            findings.add(
                "manual_run",
                schedule_id,
                f"{label} has no run.admitted event naming its request (found"
                f" {row['admitted_request_id']!r})",
            )
