-- Bench setup only, run as the database superuser: make the schedules whose task name starts
-- with `prefix` due one second ago by the database clock (they stay due: the claim-scale loop
-- claims and releases without committing, so the cursor never moves).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE ql3.trigger_schedules AS s
SET next_due_at_ms = obs.now_ms - 1000
FROM obs, ql3.tasks AS t
WHERE t.id = s.task_id AND t.name LIKE %(prefix)s || '%%'
