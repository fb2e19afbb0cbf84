-- Bench setup only (prune), as the superuser: the synthetic history's queued attempts end
-- succeeded at their admission time with the two events a worker's take and finish write, as a
-- settled history's have (a queued attempt is live: never pruned).
WITH settled AS (
    UPDATE ql3.attempts
    SET state = 'succeeded', worker_id = 'bench-prune', started_at_ms = updated_at_ms,
        finished_at_ms = updated_at_ms, exit_code = 0
    WHERE state = 'queued'
    RETURNING id, run_id, updated_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
SELECT s.run_id, s.id, e.kind, e.payload, s.updated_at_ms
FROM settled AS s
CROSS JOIN (
    VALUES (1, 'attempt.running', '{"worker_id": "bench-prune"}'::jsonb),
           (2, 'attempt.succeeded', '{"worker_id": "bench-prune", "exit_code": 0}'::jsonb)
) AS e (position, kind, payload)
ORDER BY s.id, e.position
