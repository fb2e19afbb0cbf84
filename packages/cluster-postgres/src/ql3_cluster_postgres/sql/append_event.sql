-- WorkerIngress: append one event to a run's history at database time.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
SELECT %(run_id)s, %(attempt_id)s, %(kind)s, %(payload)s, obs.now_ms
FROM obs
RETURNING id, created_at_ms
