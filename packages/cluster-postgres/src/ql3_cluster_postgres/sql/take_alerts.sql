-- AlertIngress.take_alerts: ql3.worker_take_alerts_v1 (migration 0013) leases up to a limit of
-- pending alerts whose delivery may be tried now (SKIP LOCKED) and returns what to deliver.
SELECT t.alert_id, t.kind, t.schedule_id, t.schedule_name, t.subject_key, t.run_id,
       t.occurrence_ms, t.detail, t.raised_at_ms, t.command, t.webhook, t.attempt_number,
       t.taken_at_ms
FROM ql3.worker_take_alerts_v1(%(lease_token)s::uuid, %(lease_ms)s::bigint, %(batch_limit)s::integer) AS t
