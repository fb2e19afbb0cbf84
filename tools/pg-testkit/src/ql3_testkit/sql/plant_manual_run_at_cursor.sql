-- plant_manual_run_at_cursor: a manual Run as ql3.admin_trigger_run_v1 writes it (run, first
-- attempt, both admission events), at the instant of the schedule's cursor: the occurrence the
-- next commit admits. Run as the schema owner; returns that instant.
WITH s AS (SELECT id, task_id, next_due_at_ms AS at FROM ql3.trigger_schedules WHERE id = %(id)s),
run AS (
    INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,
                          created_at_ms, kind, request_id)
    SELECT id, task_id, at, %(owner_id)s, gen_random_uuid(), at, 'manual', 'at-the-cursor'
    FROM s
    RETURNING id, created_at_ms
),
attempt AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT id, 1, 'queued', created_at_ms, created_at_ms FROM run
    RETURNING id, run_id, created_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
SELECT run_id, id, 'run.admitted', '{"request_id": "at-the-cursor"}'::jsonb, created_at_ms
FROM attempt
UNION ALL
SELECT run_id, id, 'attempt.queued', '{}'::jsonb, created_at_ms FROM attempt
RETURNING (SELECT at FROM s) AS at
