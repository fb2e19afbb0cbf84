-- AlertIngress.finish_alert: ql3.worker_finish_alert_v1 (migration 0013) records one delivery
-- attempt's outcome at database time and schedules the next try (backoff) or ends the alert.
SELECT f.delivery_state, f.attempt_number, f.next_delivery_at_ms
FROM ql3.worker_finish_alert_v1(
    %(alert_id)s::bigint, %(lease_token)s::uuid, %(worker_id)s::text, %(started_at_ms)s::bigint,
    %(delivered)s::boolean, %(error)s::text
) AS f
