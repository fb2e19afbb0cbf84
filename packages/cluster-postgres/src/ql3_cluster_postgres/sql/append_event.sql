-- WorkerIngress.append_event: ql3.worker_append_event_v1 (migration 0007) appends one event, at
-- database time, to an attempt this login holds under the token (no run.* or attempt.* kind).
SELECT e.id, e.created_at_ms
FROM ql3.worker_append_event_v1(
    %(run_id)s::bigint, %(attempt_id)s::bigint, %(lease_token)s::uuid, %(kind)s::text,
    %(payload)s::jsonb
) AS e
