-- Bench setup only, run as the database superuser: bulk-insert idle schedules (a task, a cron
-- trigger and an active schedule each) whose cursor lies ten years after the database's now, so
-- they are never due; they only make the table large for the claim-scale measurement.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
t AS (
    INSERT INTO ql3.tasks (name, created_at_ms)
    SELECT 'idle-' || lpad(g::text, 7, '0'), obs.now_ms
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g, obs
    RETURNING id
),
tr AS (
    INSERT INTO ql3.triggers (task_id, created_at_ms)
    SELECT t.id, obs.now_ms FROM t, obs
    RETURNING id, task_id
)
INSERT INTO ql3.trigger_schedules
    (trigger_id, task_id, cron, next_due_at_ms, updated_at_ms, created_at_ms)
SELECT tr.id, tr.task_id, '0 0 1 1 *', obs.now_ms + 315360000000, obs.now_ms, obs.now_ms
FROM tr, obs
