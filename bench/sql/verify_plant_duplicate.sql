-- Bench setup only (verify): admit an occurrence a second time, 10 ms after the first, with a
-- well-formed attempt and events and the schedule's commit time moved along: only `duplicate`.
WITH first_run AS (
    SELECT r.schedule_id, r.task_id, r.scheduled_for_ms, r.created_at_ms + 10 AS created_at_ms
    FROM ql3.runs AS r
    WHERE r.schedule_id = %(schedule_id)s AND r.scheduled_for_ms = %(at_ms)s
),
again AS (
    INSERT INTO ql3.runs (
        schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms
    )
    SELECT f.schedule_id, f.task_id, f.scheduled_for_ms, 'bench-rogue',
           '00000000-0000-4000-8000-000000000002'::uuid, f.created_at_ms
    FROM first_run AS f
    RETURNING id, schedule_id, created_at_ms
),
again_attempt AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT a.id, 1, 'queued', a.created_at_ms, a.created_at_ms FROM again AS a
    RETURNING id, run_id, created_at_ms
),
again_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
    SELECT a.run_id, a.id, e.kind, a.created_at_ms
    FROM again_attempt AS a
    CROSS JOIN (VALUES ('run.admitted'), ('attempt.queued')) AS e (kind)
)
UPDATE ql3.trigger_schedules AS s
SET updated_at_ms = greatest(s.updated_at_ms, a.created_at_ms)
FROM again AS a
WHERE s.id = a.schedule_id
