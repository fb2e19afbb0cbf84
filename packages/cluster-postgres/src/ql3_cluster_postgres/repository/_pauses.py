"""Resume the spans whose until has come, for the running Coordinators (DESIGN §7).

A pause with an until must end when the database clock reaches it even if no admin runs, so every
replica probes for such spans at its idle polls: one indexed statement (`expired_pauses.sql`, the
partial index on open spans with an until) that returns nothing almost always, and never touches
the claim or commit statements. For each span found, the span's occurrences up to its until are
computed with this replica's loaded zone rules and the schedule's cron, and
`ql3.resume_pause_v1` (migration 0010) writes them as one `paused` skip record, replaying nothing,
after re-checking in its transaction that the span is still open, its until has passed by the
database clock, the cursor is the one seen and the rules are the recorded ones. Replicas racing
one span therefore write one resume and one record: the losers' calls return false.
A lost reply needs no settling of its own: the function is idempotent, and the next probe finds
the span closed or closes it.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from ql3_runtime_core import QL3Error, log_event

from ql3_cluster_postgres._definitions import definition_from_columns
from ql3_cluster_postgres._pause_span import Replay, plan_span
from ql3_cluster_postgres._rows import named_row

from ._session import RepositorySession

__all__ = ["PauseStatements"]

logger = logging.getLogger(__name__)

# How many expired spans one probe resumes; the rest are found by the next probe.
_PROBE_LIMIT = 50


class _ExpiredRow(NamedTuple):
    pause_id: int
    schedule_id: int
    until_ms: int
    state: str
    next_due_at_ms: int | None
    cron: str
    timezone: str
    misfire_policy: str
    misfire_grace_ms: int
    start_at_ms: int | None
    end_at_ms: int | None


class _ResumedRow(NamedTuple):
    resumed: bool


_EXPIRED = named_row(_ExpiredRow)
_RESUMED = named_row(_ResumedRow)


class PauseStatements(RepositorySession):
    """The auto-resume probe of paused spans with an until."""

    def resume_expired_pauses(self) -> int:
        """Resume every open span whose until the database clock has reached; return how many.

        Spans of schedules this replica cannot decide (no zone rules loaded yet, a definition it
        cannot read) are left for a later probe or another replica; one bad row never stops the
        others.
        """
        rows = self._run(
            "expired_pauses", {"limit": _PROBE_LIMIT}, _EXPIRED, "repository: expired pauses"
        )
        if not rows:
            return 0
        rules = self._zones.rules
        if rules is None:
            return 0
        self._zones.preload(row.timezone for row in rows)
        resumed = 0
        for row in rows:
            cursor = row.next_due_at_ms
            try:
                definition = definition_from_columns(
                    (
                        row.cron,
                        row.timezone,
                        row.misfire_policy,
                        row.misfire_grace_ms,
                        row.start_at_ms,
                        row.end_at_ms,
                    )
                )
                plan = (
                    plan_span(definition, cursor, row.until_ms, Replay.SKIP, rules)
                    if row.state == "paused" and cursor is not None
                    else None
                )
            except (QL3Error, ValueError) as exc:
                log_event(
                    logger,
                    logging.WARNING,
                    "pause.auto_resume_skipped",
                    pause_id=row.pause_id,
                    schedule_id=row.schedule_id,
                    error=str(exc),
                )
                continue
            params = {
                "schedule_id": row.schedule_id,
                "cursor_seen": cursor,
                "end_ms": row.until_ms,
                "first_ms": None if plan is None else plan.first_ms,
                "last_ms": None if plan is None else plan.last_ms,
                "count": 0 if plan is None else plan.skipped,
                "next_cursor_ms": cursor if plan is None else plan.next_cursor_ms,
                "state": _state(cursor) if plan is None else plan.state,
                "replay": Replay.SKIP.value,
                "automatic": True,
                "zone_rules_version": rules.version,
            }
            (answer,) = self._run(
                "resume_pause", params, _RESUMED, "repository: resume expired pause"
            )
            if answer.resumed:
                resumed += 1
                log_event(
                    logger,
                    logging.INFO,
                    "pause.auto_resumed",
                    pause_id=row.pause_id,
                    schedule_id=row.schedule_id,
                    until_ms=row.until_ms,
                    skipped=0 if plan is None else plan.skipped,
                )
        return resumed


def _state(cursor: int | None) -> str:
    # A span left open on a schedule that is no longer paused is only closed; these two
    # arguments are then consistent placeholders the function does not write.
    return "exhausted" if cursor is None else "active"
