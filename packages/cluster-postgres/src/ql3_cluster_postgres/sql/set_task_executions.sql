-- ScheduleAdmin: set what each given task runs and how, in the admin transaction that creates
-- or changes its schedule. Queued attempts read the task when a worker takes them, so a change
-- applies to every attempt that has not started yet.
UPDATE ql3.tasks AS t
SET command = i.command,
    max_attempts = i.max_attempts,
    timeout_ms = i.timeout_ms,
    retry_backoff_ms = i.retry_backoff_ms
FROM unnest(
    %(task_ids)s::bigint[], %(commands)s::text[], %(max_attempts)s::integer[],
    %(timeouts_ms)s::bigint[], %(retry_backoffs_ms)s::bigint[]
) AS i (task_id, command, max_attempts, timeout_ms, retry_backoff_ms)
WHERE t.id = i.task_id
