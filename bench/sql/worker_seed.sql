-- Bench setup only (worker), run as the database owner: admit `count` Runs of the task `task` in
-- one transaction at one database instant, each with its queued first attempt and the two
-- admission events, as the fenced commit writes them (DESIGN §5); the attempts' INSERT notifies
-- `ql3_attempt_queued` once (migration 0015), as an admission does. Occurrences go backwards
-- from the earliest one already admitted, so repeated seeds never collide.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
target AS (
    SELECT s.id AS schedule_id, s.task_id,
           coalesce((SELECT min(r.scheduled_for_ms) FROM ql3.runs AS r WHERE r.schedule_id = s.id),
                    (SELECT now_ms FROM obs)) AS floor_ms
    FROM ql3.trigger_schedules AS s
    JOIN ql3.tasks AS k ON k.id = s.task_id
    WHERE k.name = %(task)s
),
new_runs AS (
    INSERT INTO ql3.runs (
        schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms
    )
    SELECT t.schedule_id, t.task_id, t.floor_ms - g.g, 'bench-worker',
           '00000000-0000-4000-8000-000000000002'::uuid, obs.now_ms
    FROM target AS t CROSS JOIN obs CROSS JOIN generate_series(1, %(count)s::integer) AS g (g)
    ORDER BY g.g
    RETURNING id
),
new_attempts AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT r.id, 1, 'queued', obs.now_ms, obs.now_ms
    FROM new_runs AS r CROSS JOIN obs
    ORDER BY r.id
    RETURNING id, run_id
),
new_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
    SELECT a.run_id, a.id, k.kind, obs.now_ms
    FROM new_attempts AS a
    CROSS JOIN (VALUES (1, 'run.admitted'), (2, 'attempt.queued')) AS k (position, kind)
    CROSS JOIN obs
    ORDER BY a.run_id, k.position
    RETURNING id
)
SELECT (SELECT now_ms FROM obs) AS admitted_at_ms,
       (SELECT count(*) FROM new_attempts) AS attempts,
       (SELECT count(*) FROM new_events) AS events
