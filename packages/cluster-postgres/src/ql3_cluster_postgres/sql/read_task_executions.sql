-- ScheduleAdmin: what the given tasks run and how (migration 0005) and their overlap policy and
-- cap of live Runs (migration 0009), by task id; all tasks when task_ids is NULL.
SELECT t.id AS task_id, t.name, t.command, t.max_attempts, t.timeout_ms, t.retry_backoff_ms,
       t.overlap, t.max_running
FROM ql3.tasks AS t
WHERE %(task_ids)s::bigint[] IS NULL OR t.id = ANY (%(task_ids)s::bigint[])
ORDER BY t.id
