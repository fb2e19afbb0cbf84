-- WorkerIngress: take up to batch_limit queued attempts (oldest first) and mark them running, at
-- database time, appending an attempt.running event each. SKIP LOCKED lets several ingress
-- workers take disjoint attempts without waiting on each other.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
picked AS (
    SELECT a.id
    FROM ql3.attempts AS a
    WHERE a.state = 'queued'
    ORDER BY a.id
    LIMIT %(batch_limit)s
    FOR UPDATE SKIP LOCKED
),
taken AS (
    UPDATE ql3.attempts AS a
    SET state = 'running', updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
    FROM picked AS p CROSS JOIN obs
    WHERE a.id = p.id
    RETURNING a.id, a.run_id, a.attempt_number, a.created_at_ms, a.updated_at_ms
),
running_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
    SELECT t.run_id, t.id, 'attempt.running', obs.now_ms
    FROM taken AS t CROSS JOIN obs
    ORDER BY t.id
    RETURNING id
)
SELECT t.id, t.run_id, r.schedule_id, r.task_id, r.scheduled_for_ms, t.attempt_number,
       t.created_at_ms, t.updated_at_ms, k.name, k.payload_template
FROM taken AS t
JOIN ql3.runs AS r ON r.id = t.run_id
JOIN ql3.tasks AS k ON k.id = r.task_id
ORDER BY t.id
