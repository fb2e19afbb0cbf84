"""AlertIngress: how workers record due alerts and deliver alerts (role `ql3_worker_ingress`).

Each method calls one SECURITY DEFINER function of migration 0013 (`sql/<method>.sql`), which
reads the database clock once: `record_due_alerts` records the `missed` and `late` alerts whose
bound has passed (the one cheap statement every worker sends each poll, so `missed` is recorded
while every Coordinator is down), `take_alerts` leases pending alerts for one delivery attempt,
`finish_alert` records that attempt's outcome and schedules the next try (exponential backoff, by
the database). Delivery is at least once: a worker that dies holding an alert leaves it to expire
by its lease, and the next worker delivers it again under the same alert id (the idempotency key).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ql3_runtime_core import InvalidArgumentError, ZoneRules, wheel_zone_rules

from ql3_cluster_postgres._alerts import RecordedAlert, TakenAlert
from ql3_cluster_postgres._bounds import check_lease, check_limit
from ql3_cluster_postgres._missed import record_missed

from ._sessions import IngressSessions

if TYPE_CHECKING:
    from uuid import UUID

__all__ = ["AlertIngress"]

# worker_finish_alert_v1 keeps the last 4 096 characters of an error (alert_deliveries_error).
_ERROR_MAX = 4096


class AlertIngress(IngressSessions):
    """Record due alerts, take pending ones and record each delivery attempt's outcome."""

    def record_due_alerts(self) -> list[RecordedAlert]:
        """Record the `missed` and `late` alerts the database clock makes due; return the new.

        One statement when nothing is overdue; per overdue schedule one more, carrying the
        occurrences `_missed.record_missed` computed (one `missed` alert per occurrence).
        """
        rows = self._write("record_due_alerts", {}, "alerts: record due alerts")
        return record_missed(
            rows,
            _node_rules,
            lambda params: self._write("record_missed_alerts", params, "alerts: record missed"),
        )

    def take_alerts(self, *, lease_token: UUID, lease_ms: int, limit: int) -> list[TakenAlert]:
        """Lease up to `limit` alerts whose delivery may be tried now (SKIP LOCKED)."""
        check_lease(lease_ms)
        check_limit(limit)
        params = {"lease_token": lease_token, "lease_ms": lease_ms, "batch_limit": limit}
        rows = self._write("take_alerts", params, "alerts: take")
        return [TakenAlert.model_validate(row) for row in rows]

    def finish_alert(
        self,
        alert_id: int,
        *,
        lease_token: UUID,
        worker_id: str,
        started_at_ms: int,
        error: str | None,
    ) -> str | None:
        """Record one delivery attempt: delivered when `error` is None, failed otherwise.

        Returns the alert's delivery state now (`delivered`, `pending`: tried again after the
        backoff, `failed`: given up), or None when this worker no longer held it (its lease
        expired and another worker took it: that worker's attempt is the one recorded).
        """
        if error is not None and not error:
            raise InvalidArgumentError("error", error, "must be None (delivered) or non-empty")
        params = {
            "alert_id": alert_id,
            "lease_token": lease_token,
            "worker_id": worker_id,
            "started_at_ms": started_at_ms,
            "delivered": error is None,
            "error": None if error is None else error[-_ERROR_MAX:],
        }
        rows = self._write("finish_alert", params, "alerts: finish")
        return str(rows[0]["delivery_state"]) if rows else None


def _node_rules(recorded: str) -> ZoneRules | None:
    """Return this node's tzdata rules when they are the recorded version, else None.

    A worker holds no zone rules of its own: it computes missed occurrences only when its
    node's tzdata is the version the database recorded (the same data the Coordinators load),
    and otherwise leaves each overdue schedule with its cursor's alert alone.
    """
    rules = wheel_zone_rules()
    return rules if rules.version == recorded else None
