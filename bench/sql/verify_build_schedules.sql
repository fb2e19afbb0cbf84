-- Bench setup only (verify), run as the database superuser: one task, cron trigger and active
-- schedule per input row, written with the times the bench chose (a history in the past, so the
-- rows are not what ScheduleAdmin would write now). Returns the ids in input order.
WITH input AS (
    SELECT *
    FROM unnest(
        %(names)s::text[], %(crons)s::text[], %(timezones)s::text[], %(policies)s::text[],
        %(graces)s::bigint[], %(cursors)s::bigint[], %(created)s::bigint[],
        %(updated)s::bigint[]
    ) WITH ORDINALITY AS i (
        name, cron, timezone, policy, grace, cursor_ms, created_at_ms, updated_at_ms, position
    )
),
new_tasks AS (
    INSERT INTO ql3.tasks (name, created_at_ms)
    SELECT i.name, i.created_at_ms FROM input AS i ORDER BY i.position
    RETURNING id, name
),
new_triggers AS (
    INSERT INTO ql3.triggers (task_id, created_at_ms)
    SELECT t.id, i.created_at_ms
    FROM new_tasks AS t
    JOIN input AS i ON i.name = t.name
    RETURNING id, task_id
),
new_schedules AS (
    INSERT INTO ql3.trigger_schedules (
        trigger_id, task_id, cron, timezone, misfire_policy, misfire_grace_ms, state,
        next_due_at_ms, updated_at_ms, created_at_ms
    )
    SELECT g.id, g.task_id, i.cron, i.timezone, i.policy, i.grace, 'active', i.cursor_ms,
           i.updated_at_ms, i.created_at_ms
    FROM new_triggers AS g
    JOIN new_tasks AS t ON t.id = g.task_id
    JOIN input AS i ON i.name = t.name
    RETURNING id, task_id
)
SELECT s.id AS schedule_id, s.task_id
FROM new_schedules AS s
JOIN new_tasks AS t ON t.id = s.task_id
JOIN input AS i ON i.name = t.name
ORDER BY i.position
