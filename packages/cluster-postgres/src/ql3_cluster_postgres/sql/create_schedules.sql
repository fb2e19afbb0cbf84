-- ScheduleAdmin: create task + cron trigger + schedule for each input row, in one statement.
-- Cursors were computed by runtime-core from the database's own now (placement_now_ms.sql, read
-- earlier in the same transaction); created_at_ms/updated_at_ms come from the database clock here.
-- A taken name yields no row (ON CONFLICT DO NOTHING), which the caller reports as a duplicate.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
input AS (
    SELECT *
    FROM unnest(
        %(names)s::text[], %(payloads)s::jsonb[], %(crons)s::text[], %(timezones)s::text[],
        %(policies)s::text[], %(graces)s::bigint[], %(starts)s::bigint[], %(ends)s::bigint[],
        %(cursors)s::bigint[], %(states)s::text[]
    ) AS i (
        name, payload, cron, timezone, policy, grace, start_at_ms, end_at_ms, next_due_at_ms,
        state
    )
),
new_tasks AS (
    INSERT INTO ql3.tasks (name, payload_template, created_at_ms)
    SELECT i.name, i.payload, obs.now_ms FROM input AS i CROSS JOIN obs
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name
),
new_triggers AS (
    INSERT INTO ql3.triggers (task_id, kind, enabled, created_at_ms)
    SELECT t.id, 'cron', true, obs.now_ms FROM new_tasks AS t CROSS JOIN obs
    RETURNING id, task_id
),
new_schedules AS (
    INSERT INTO ql3.trigger_schedules (
        trigger_id, task_id, cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms,
        end_at_ms, state, next_due_at_ms, version, updated_at_ms, created_at_ms
    )
    SELECT g.id, t.id, i.cron, i.timezone, i.policy, i.grace, i.start_at_ms, i.end_at_ms,
           i.state, i.next_due_at_ms, 0, obs.now_ms, obs.now_ms
    FROM new_triggers AS g
    JOIN new_tasks AS t ON t.id = g.task_id
    JOIN input AS i ON i.name = t.name
    CROSS JOIN obs
    RETURNING *
)
SELECT s.id, s.task_id, t.name, s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms,
       s.start_at_ms, s.end_at_ms, s.state, s.next_due_at_ms, s.claim_owner_id,
       s.claim_expires_at_ms, s.version, s.updated_at_ms, s.created_at_ms, s.invalid_reason,
       s.invalidated_at_ms
FROM new_schedules AS s
JOIN new_tasks AS t ON t.id = s.task_id
ORDER BY t.name
